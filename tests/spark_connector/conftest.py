"""Spark test set-up: a real local SparkSession (local[2], loopback) per module and a real node.

Spark needs a Java runtime; ``make test`` installs one (scripts/ensure-system-deps.sh). Without it
these tests fail with that message rather than being skipped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from segments.key_ring import KeyRing, write_ring
from segments.reader import SegmentReader, high_watermarks, partition_directories
from spark_connector.sources import DirectSource
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

CHECKPOINT_WAIT_S = 30.0
POLL_S = 0.05


def _check_java() -> None:
    java = shutil.which("java")
    if java is None:
        pytest.fail("Spark needs a Java runtime (java is not on PATH): run `make test`, which installs "
                    "openjdk-17-jre-headless, or install a JRE 17+", pytrace=False)
    result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        pytest.fail(f"`java -version` failed: {result.stderr.strip()}", pytrace=False)


def require_segments_jar() -> None:
    """The JVM reader's tests need its jar, which ``make test`` builds (``make jvm``)."""
    from spark_connector.session import SEGMENTS_JAR

    if not os.path.exists(SEGMENTS_JAR):
        pytest.fail(f"the JVM reader is not built ({SEGMENTS_JAR}): run `make jvm` (make test builds it)",
                    pytrace=False)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    _check_java()
    from spark_connector.session import local_session

    session = local_session("logbroker-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("node") / "data"), *SMALL_SEGMENTS) as process:
        yield process


def http_json(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def create_topic(node: NodeProcess, name: str, partitions: int, config: dict[str, Any] | None = None) -> None:
    http_json(node.url + "/v1/topics", "POST", {"name": name, "partitions": partitions, "config": config or {}})


def produce(node: NodeProcess, topic: str, records: list[dict[str, Any]]) -> list[dict[str, int]]:
    offsets: list[dict[str, int]] = http_json(f"{node.url}/v1/topics/{topic}/records?acks=1", "POST",
                                              {"records": records})["offsets"]
    return offsets


def latest_offsets(node: NodeProcess, topic: str) -> dict[int, int]:
    described = http_json(f"{node.url}/v1/topics/{topic}")
    return {p["partition"]: p["latest_offset"] for p in described["partitions"]}


def wait_for_checkpoint(node: NodeProcess, topic: str) -> dict[int, int]:
    """Poll until the node's high-watermark checkpoint has caught up with its high watermarks."""
    want = latest_offsets(node, topic)
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while time.monotonic() < deadline:
        marks = high_watermarks(node.data_dir)
        if all(marks.get((topic, p), -1) >= o for p, o in want.items()):
            return want
        time.sleep(POLL_S)
    raise AssertionError(f"the high watermark checkpoint did not reach {want} within {CHECKPOINT_WAIT_S} s")


def wait_for_retention(directory: str, retention_bytes: int) -> None:
    """Wait until retention has nothing left to delete: the log starts past 0 and dropping its oldest
    segment would take it under ``retention_bytes`` (the rule of ``Log.apply_retention``). Waiting for
    the first deletion alone races a pass that ran while the records were still arriving."""
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while not _retention_done(directory, retention_bytes):
        assert time.monotonic() < deadline, "retention did not delete the first segments in time"
        time.sleep(POLL_S)


def _retention_done(directory: str, retention_bytes: int) -> bool:
    sizes = [os.path.getsize(os.path.join(directory, name))
             for name in sorted(os.listdir(directory)) if name.endswith(".log")]
    settled = len(sizes) <= 1 or sum(sizes) - sizes[0] < retention_bytes
    return settled and SegmentReader(directory).log_start_offset() > 0


def aged_topic(node: Any, topic: str) -> tuple[int, int]:
    """A topic whose first records retention has deleted: returns (earliest, high watermark)."""
    retention_bytes = 4096
    create_topic(node, topic, 1, {"segment_bytes": 2048, "retention_bytes": retention_bytes})
    for _ in range(10):
        produce(node, topic, [{"value": "z" * 100, "partition": 0} for _ in range(10)])
    wait_for_checkpoint(node, topic)
    wait_for_retention(partition_directories(node.data_dir, topic)[0], retention_bytes)
    bounds = DirectSource((node.data_dir,), topic).bounds()[0]
    assert 0 < bounds.earliest < bounds.latest == 100
    return bounds.earliest, bounds.latest


def collected_rows(df: Any) -> dict[tuple[int, int], tuple[Any, ...]]:
    """A DataFrame's rows by (partition, offset), each once (a duplicate fails the test)."""
    rows = {}
    for row in df.collect():
        key = (row.partition, row.offset)
        assert key not in rows, f"duplicate record {key}"
        rows[key] = (row.key, row.value, row.topic, row.partition, row.offset, row.timestamp, dict(row.headers))
    return rows


def ring_file(tmp_path_factory: pytest.TempPathFactory, ring: KeyRing) -> str:
    """``ring`` written to a key ring file (mode 0600) for a node's ``--encryption-keys-file``."""
    path = str(tmp_path_factory.mktemp("keys") / "ring")
    write_ring(path, ring)
    return path
