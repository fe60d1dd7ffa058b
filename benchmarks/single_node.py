"""The frame the LogBroker-only benchmarks share (``log``, ``node``, ``auth``, ``groups``, ``queue``): a
temporary work dir removed afterwards, samples gathered per figure name over the repetitions, and
the summary (median, min, max) written as one result file and printed as a table."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from benchmarks.results import DEFAULT_OUT_DIR, print_table, summarize, write_result

Samples = dict[str, list[float]]
WORKER_POLL_S = 0.01
WORKER_RUN_S_MAX = 600.0


@contextlib.contextmanager
def work_dir(prefix: str, parent: str | None) -> Iterator[str]:
    """A fresh directory under ``parent`` (default: the current one), removed on the way out."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent or os.getcwd())
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def gather(samples: Samples, figures: Mapping[str, float]) -> None:
    """Append one repetition's figures to the samples of each name."""
    for name, value in figures.items():
        samples.setdefault(name, []).append(value)


def summarize_all(samples: Samples, unit_of: Callable[[str], str]) -> tuple[dict[str, float], dict[str, str]]:
    figures: dict[str, float] = {}
    units: dict[str, str] = {}
    for name, values in samples.items():
        summarize(name, values, unit_of(name), figures, units)
    return figures, units


def publish(scenario: str, figures: dict[str, float], units: dict[str, str], *, out_dir: str | None,
            started_at: datetime.datetime, params: Mapping[str, Any], version: str = "0.1.0") -> dict[str, float]:
    """Write ``<scenario>.json`` and print the table; returns ``figures``."""
    path = write_result(out_dir or DEFAULT_OUT_DIR, scenario, system="logbroker", version=version,
                        started_at=started_at, params=params, figures=figures, units=units)
    print_table(figures, units)
    print(f"[{scenario}] wrote {path}")
    return figures


async def run_worker_processes(argv: list[str], count: int, done: Callable[[], Awaitable[bool]]) -> tuple[float, int]:
    """Start ``count`` processes of ``python -m <argv>``, each printing ``ready``, then waiting for
    ``go`` on stdin, then (when stdin closes) printing how many items it handled. Returns the
    seconds from ``go`` until ``done()`` (polled every ``WORKER_POLL_S``) and the items handled
    in all. Every process is killed by PID on the way out, whatever happened."""
    procs = [subprocess.Popen([sys.executable, "-m", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(count)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        async with asyncio.timeout(WORKER_RUN_S_MAX):
            while not await done():
                await asyncio.sleep(WORKER_POLL_S)
        elapsed = time.perf_counter() - started
        handled = sum(int(proc.communicate(timeout=WORKER_RUN_S_MAX)[0].strip()) for proc in procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return elapsed, handled
