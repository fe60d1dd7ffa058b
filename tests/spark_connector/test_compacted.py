"""The Spark read paths over a compacted topic of a real node, without Spark (decision 0324): a
read through the node learns the topic is compacted and reads every kept record across the gaps
compaction left, with no data loss reported; read straight from the files, the gaps are data loss
unless the task says the topic is compacted."""

from __future__ import annotations

import os
import time

import pytest

from spark_connector.errors import DataLossError
from spark_connector.options import Location
from spark_connector.sources import DirectSource, HttpSource
from spark_connector.tasks import ReadTask, read_task
from tests.spark_connector.conftest import create_topic, http_json, produce, wait_for_checkpoint
from tests.support.nodes import NodeProcess

DEADLINE_S = 30.0
WRITES = 60


def _offsets(task: ReadTask) -> list[int]:
    return [o for batch in read_task(task) for o in batch.column("offset").to_pylist()]


def _compacted_topic(node: NodeProcess, topic: str) -> list[int]:
    """A compacted topic with one stable key and five rewritten ones; the offsets kept once the
    node's maintenance compacted it."""
    create_topic(node, topic, 1, {"cleanup_policy": "compact", "segment_bytes": 1024,
                                  "min_cleanable_dirty_ratio": 0.01})
    for i in range(WRITES):
        produce(node, topic, [{"key": "stable" if i == 0 else f"k{i % 5}", "value": f"{i:03d}" + "x" * 60,
                               "partition": 0}])
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        offsets = _fetched(node, topic)
        if len(offsets) < WRITES // 2:
            return offsets
        time.sleep(0.3)
    raise AssertionError(f"the node never compacted the topic: {offsets}")


def _fetched(node: NodeProcess, topic: str) -> list[int]:
    (part,) = http_json(f"{node.url}/v1/topics/{topic}")["partitions"]
    offset, offsets = part["earliest_offset"], list[int]()
    for _ in range(WRITES + 1):
        reply = http_json(f"{node.url}/v1/topics/{topic}/partitions/0/records?offset={offset}")
        if not reply["records"]:
            break
        offsets.extend(r["offset"] for r in reply["records"])
        offset = reply["next_offset"]
    return offsets


def test_a_read_through_the_node_crosses_the_gaps_without_data_loss(node: NodeProcess) -> None:
    kept = _compacted_topic(node, "compacted-http")
    source = HttpSource(Location(url=node.url), "compacted-http")
    bounds = source.bounds()[0]
    assert source.compacted
    task = ReadTask(Location(url=node.url), "", "compacted-http", 0, 0, bounds.latest, True, source.compacted)
    assert _offsets(task) == kept


def test_a_direct_read_crosses_the_gaps_when_the_task_says_compacted(node: NodeProcess) -> None:
    kept = _compacted_topic(node, "compacted-files")
    wait_for_checkpoint(node, "compacted-files")
    source = DirectSource((node.data_dir,), "compacted-files")
    directory, end = source.directory(0), source.bounds()[0].latest
    location = Location(data_dirs=(os.path.dirname(directory),))
    assert _offsets(ReadTask(location, directory, "compacted-files", 0, 0, end, True, True)) == kept
    with pytest.raises(DataLossError):
        _offsets(ReadTask(location, directory, "compacted-files", 0, 0, end, True, False))
