"""Idle-consumer memory: read on a fresh server per repetition, settled, per consumer in KB; a
small real run against LogBroker alone (no peers needed)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from benchmarks import idle_memory, plan
from benchmarks.harness import document_for, make_server, rotated
from benchmarks.idle_memory import settled_rss_mb
from benchmarks.progress import Progress
from tests.benchmarks.support import STARTED
from tests.conftest import ROOT

SMALL = dataclasses.replace(plan.QUICK, reps=3, idle_memory_consumers=100, idle_memory_hold_s=0.2,
                            idle_memory_window_s=0.5)


class FakeClock:
    def __init__(self, readings: list[float]) -> None:
        self.readings = readings
        self.now = 0.0
        self.pids: list[int] = []

    def sample(self, pid: int) -> float:
        self.pids.append(pid)
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_rss_counts_once_a_window_of_readings_is_steady():
    fake = FakeClock([50.0, 80.0, 100.0, 100.3, 100.1, 130.0])   # growing, then within 0.5 % of RSS
    reading = settled_rss_mb(42, 0.5, sample=fake.sample, clock=lambda: fake.now, sleep=fake.sleep)
    assert reading.settled and reading.mb == pytest.approx(100.1)
    assert set(fake.pids) == {42} and len(fake.pids) == 5        # 3 readings span the 0.5 s window


def test_rss_that_never_settles_is_marked_so():
    fake = FakeClock([float(i) for i in range(1000)])            # 1 MB more at every reading
    reading = settled_rss_mb(7, 0.5, timeout_s=5.0, sample=fake.sample, clock=lambda: fake.now, sleep=fake.sleep)
    assert not reading.settled and reading.waited_s >= 5.0
    assert reading.mb == fake.readings[0] - 2                     # the median of the last window


def test_the_open_files_limit_is_raised_to_the_hard_limit():
    code = ("import resource\nfrom benchmarks.procstat import raise_open_files_limit\n"
            "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
            "print(raise_open_files_limit(1000) == resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 1512)\n"
            "try:\n    raise_open_files_limit(hard + 1)\n"
            "except RuntimeError as e:\n    print('hard limit' in str(e))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


@pytest.mark.slow
def test_each_repetition_reads_a_fresh_logbroker_node(tmp_path, monkeypatch):
    started: list[int] = []
    sampled: list[int] = []

    def fresh(system: str):
        server = make_server(system, str(tmp_path))
        start = server.start

        def start_and_note():
            endpoint = start()
            started.append(endpoint.server_pid)
            return endpoint

        server.start = start_and_note
        return server

    def noted(pid: int, window_s: float):
        sampled.append(pid)
        return real(pid, window_s)

    real = idle_memory.settled_rss_mb
    monkeypatch.setattr(idle_memory, "settled_rss_mb", noted)
    with Progress(SMALL.reps) as progress:
        outcomes = idle_memory.run(["logbroker"], fresh, SMALL, progress, rotated)
    assert len(set(started)) == SMALL.reps                       # a new node every repetition ...
    assert sampled == [pid for pid in started for _ in ("before", "after")]   # ... and only it is read
    assert os.getpid() not in sampled
    assert [p for p in tmp_path.iterdir() if p.name.startswith("bench-")] == []   # every node stopped

    outcome = outcomes["logbroker"]
    document = document_for("idle", "logbroker", "0.1.0", STARTED, "20261123T000000Z", False, outcome, {})
    figures, units, params = document["figures"], document["unit"], document["params"]
    assert units["idle_server_rss_per_consumer_kb"] == "KB" and units["idle_server_rss_growth_mb"] == "MB"
    assert figures["idle_server_rss_fresh_mb"] > 0
    for fresh_mb, growth, per in zip(outcome.samples["idle_server_rss_fresh_mb"],
                                     outcome.samples["idle_server_rss_growth_mb"],
                                     outcome.samples["idle_server_rss_per_consumer_kb"], strict=True):
        assert fresh_mb > 0 and growth > 0                       # 100 waiting connections cost something
        assert per == pytest.approx(growth * 1e3 / SMALL.idle_memory_consumers)
    assert figures["idle_server_rss_per_consumer_kb_min"] <= figures["idle_server_rss_per_consumer_kb"]
    assert params["idle_memory_consumers"] == 100 and "fresh server" in params["idle_memory"]
    assert params["idle_memory_process"].startswith("the node process")
    assert params["idle_memory_unsettled"] == "none: every reading settled" or \
        all("did not settle" in note for note in params["idle_memory_unsettled"])
