"""The direct (segment file) read path against a real node's data directory, without Spark:
appends in progress, a torn tail, retention deleting segments before or during a read."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from segments.batch import ProducerRecord, encode_batch
from segments.reader import partition_directories
from spark_connector.errors import DataLossError
from spark_connector.options import Location
from spark_connector.sources import DirectSource
from spark_connector.tasks import ReadTask, read_task
from tests.spark_connector.conftest import aged_topic, create_topic, produce, wait_for_checkpoint

DEADLINE_S = 30.0
POLL_S = 0.05


def _task(directory: str, topic: str, start: int, end: int, *, fail: bool = True, partition: int = 0) -> ReadTask:
    return ReadTask(Location(data_dirs=(os.path.dirname(directory),)), directory, topic, partition, start, end, fail)


def _offsets(task: ReadTask) -> list[int]:
    return [o for batch in read_task(task) for o in batch.column("offset").to_pylist()]


def test_reads_stop_at_the_checkpointed_high_watermark_and_a_torn_tail_is_the_end(node, tmp_path):
    create_topic(node, "torn", 1)
    produce(node, "torn", [{"value": f"v{i}", "partition": 0} for i in range(30)])
    wait_for_checkpoint(node, "torn")
    copy = tmp_path / "copy"
    os.makedirs(copy)
    shutil.copytree(os.path.join(node.data_dir, "torn-0"), copy / "torn-0")
    shutil.copy(os.path.join(node.data_dir, "high-watermark-checkpoint"), copy)
    segment = sorted(n for n in os.listdir(copy / "torn-0") if n.endswith(".log"))[-1]
    more = encode_batch([ProducerRecord(b"appended but not committed")], base_offset=30)
    torn = encode_batch([ProducerRecord(b"being appended")], base_offset=31)
    with open(copy / "torn-0" / segment, "ab") as f:
        f.write(more)  # a whole batch past the high watermark
        f.write(torn[: len(torn) // 2])  # and half of one: an append in progress
    source = DirectSource((str(copy),), "torn")
    assert source.bounds()[0].latest == 30
    assert _offsets(_task(source.directory(0), "torn", 0, 30)) == list(range(30))
    # Past the high watermark (never planned): the whole batch is there, the torn one is the end.
    assert _offsets(_task(source.directory(0), "torn", 0, 31)) == list(range(31))
    with pytest.raises(DataLossError, match=r"offsets 31..39 cannot be read"):
        _offsets(_task(source.directory(0), "torn", 0, 40))  # a short read is never silent


def test_a_read_while_the_node_appends_returns_exactly_the_planned_range(node):
    create_topic(node, "busy", 1, {"segment_bytes": 4096})
    produce(node, "busy", [{"value": "x" * 50, "partition": 0} for _ in range(200)])
    planned = wait_for_checkpoint(node, "busy")[0]
    stop = threading.Event()

    def keep_producing() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            produce(node, "busy", [{"value": "y" * 50, "partition": 0} for _ in range(20)])

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        directory = partition_directories(node.data_dir, "busy")[0]
        for _ in range(5):
            assert _offsets(_task(directory, "busy", 0, planned)) == list(range(planned))
    finally:
        stop.set()
        producer.join(DEADLINE_S)


def test_records_deleted_by_retention_fail_the_read_or_are_skipped(node):
    earliest, latest = aged_topic(node, "aging")
    directory = partition_directories(node.data_dir, "aging")[0]
    with pytest.raises(DataLossError, match=rf"offsets 0..{earliest - 1} cannot be read"):
        _offsets(_task(directory, "aging", 0, latest))
    assert _offsets(_task(directory, "aging", 0, latest, fail=False)) == list(range(earliest, latest))


def test_a_segment_missing_in_the_middle_is_data_loss(node, tmp_path):
    create_topic(node, "gap", 1, {"segment_bytes": 2048})
    for _ in range(6):
        produce(node, "gap", [{"value": "g" * 100, "partition": 0} for _ in range(10)])
    wait_for_checkpoint(node, "gap")
    directory = partition_directories(node.data_dir, "gap")[0]
    copy = str(tmp_path / "gap-0")
    shutil.copytree(directory, copy)
    segments = sorted(n for n in os.listdir(copy) if n.endswith(".log"))
    assert len(segments) >= 3
    os.unlink(os.path.join(copy, segments[1]))  # as retention racing a reader that listed the files
    second = int(segments[1][:20])
    third = int(segments[2][:20])
    with pytest.raises(DataLossError, match=rf"offsets {second}..{third - 1} cannot be read"):
        _offsets(_task(copy, "gap", 0, 60))
    assert _offsets(_task(copy, "gap", 0, 60, fail=False)) == list(range(second)) + list(range(third, 60))
