"""Exactly once from Spark into LogBroker (decision 0299): a streaming query whose driver is
killed with SIGKILL while a micro-batch is being written, then restarted from its checkpoint,
leaves every input record in the output topic exactly once (count and content). The same run
with ``exactlyOnce=false`` stores the re-run batch's records twice, so the test can tell."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest

from spark_connector.write_identity import (
    EPOCHS,
    TASKS_MAX,
    producer_epoch,
    producer_id,
    scope_hash,
    streaming_scope,
)
from tests.spark_connector.conftest import _check_java, create_topic, http_json, produce
from tests.support.nodes import NodeProcess

RECORDS = 2_400
VALUE_PAD = "x" * 200  # a few records per 1 KiB batch: a micro-batch takes many writes
KILL_DEADLINE_S = 180.0
DRAIN_TIMEOUT_S = 300.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _driver(node: NodeProcess, source: str, sink: str, checkpoint: str, mode: str, exactly_once: bool,
            log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.spark_connector.exactly_once_driver", node.url, source, sink,
                             checkpoint, mode, str(exactly_once).lower()],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(driver: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver's whole process group (its JVM and Python workers too)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)


def _stored(node: NodeProcess, topic: str) -> int:
    return sum(p["latest_offset"] for p in http_json(f"{node.url}/v1/topics/{topic}")["partitions"])


def _values(node: NodeProcess, topic: str) -> collections.Counter[str]:
    values: collections.Counter[str] = collections.Counter()
    for p in http_json(f"{node.url}/v1/topics/{topic}")["partitions"]:
        offset = 0
        while offset < p["latest_offset"]:
            with urllib.request.urlopen(f"{node.url}/v1/topics/{topic}/partitions/{p['partition']}/records"
                                        f"?offset={offset}&max_records=10000", timeout=30) as response:
                answer = json.loads(response.read())
            values.update(r["value"] for r in answer["records"])
            offset = answer["next_offset"]
    return values


def _batches(directory: str) -> set[int]:
    try:
        return {int(n) for n in os.listdir(directory) if n.isdigit()}
    except FileNotFoundError:
        return set()


def _run_killed_then_drained(node: NodeProcess, tmp_path: Any, name: str, exactly_once: bool) -> dict[str, Any]:
    source, sink = f"{name}.in", f"{name}.out"
    create_topic(node, source, 3)
    create_topic(node, sink, 2, {"dedup_window_ms": 600_000})
    for start in range(0, RECORDS, 600):
        produce(node, source, [{"key": f"k{i % 7}", "value": f"r{i}-{VALUE_PAD}"} for i in range(start, start + 600)])
    checkpoint = str(tmp_path / f"{name}-checkpoint")
    log = open(tmp_path / f"{name}-driver.log", "ab")  # noqa: SIM115 (closed below)
    seen: dict[str, Any] = {}
    try:
        driver = _driver(node, source, sink, checkpoint, "run", exactly_once, log)
        try:
            deadline = time.monotonic() + KILL_DEADLINE_S
            while time.monotonic() < deadline and driver.poll() is None:
                planned = _batches(os.path.join(checkpoint, "offsets"))
                committed = _batches(os.path.join(checkpoint, "commits"))
                open_batch = max(planned - committed, default=None)
                if open_batch is not None and committed and open_batch > max(committed):
                    before = _stored(node, sink)
                    time.sleep(0.05)
                    if _stored(node, sink) > before and open_batch not in _batches(os.path.join(checkpoint, "commits")):
                        _kill(driver)  # records of the open batch are stored; its commit is not
                        seen = {"batch": open_batch, "stored_at_kill": _stored(node, sink)}
                        break
                time.sleep(0.01)
        finally:
            _kill(driver)
        assert seen, f"the driver was never caught writing a batch; see {log.name}"
        assert seen["batch"] not in _batches(os.path.join(checkpoint, "commits")), "killed before the commit"
        drained = _driver(node, source, sink, checkpoint, "drain", exactly_once, log)
        try:
            assert drained.wait(timeout=DRAIN_TIMEOUT_S) == 0, f"the restarted query failed; see {log.name}"
        finally:
            _kill(drained)
    finally:
        log.close()
    seen["values"] = _values(node, sink)
    return seen


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_driver_killed_mid_batch_and_restarted_stores_every_record_once(node, tmp_path, exactly_once) -> None:
    _check_java()
    run = _run_killed_then_drained(node, tmp_path, "eo" if exactly_once else "alo", exactly_once)
    expected = collections.Counter(f"r{i}-{VALUE_PAD}" for i in range(RECORDS))
    assert set(run["values"]) == set(expected), "every input record arrived"
    twice = sum(n - 1 for n in run["values"].values() if n > 1)
    if exactly_once:
        assert run["values"] == expected and twice == 0
    else:
        assert twice > 0, "without identities, the re-run batch's stored records are stored again"


def test_identities_separate_tasks_and_batches_and_stay_within_the_brokers_rules() -> None:
    ids = {producer_id(0x1234, "query", task) for task in range(TASKS_MAX)}
    assert len(ids) == TASKS_MAX and all(i >> 31 == 0x1234 for i in ids)
    assert {producer_epoch(b) for b in range(3 * EPOCHS)} == set(range(EPOCHS)), "never the key epoch 32767"
    assert producer_id(1, "a", 5) == producer_id(1, "a", 5) and 0 <= scope_hash("q") < 1 << 16
    with pytest.raises(ValueError):
        producer_id(1, "a", TASKS_MAX)
    assert producer_epoch(0) == producer_epoch(EPOCHS), "the epochs of batch 0 and batch EPOCHS agree, so ..."
    assert producer_id(1, streaming_scope("q", 0), 3) != producer_id(1, streaming_scope("q", EPOCHS), 3), \
        "... their scopes differ"
