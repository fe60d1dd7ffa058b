"""The read-only segment reader: reads what the log wrote, from any offset, up to a limit,
alongside a live writer, without changing a byte on disk."""

from __future__ import annotations

import hashlib
import os

import pytest

from segments.checkpoint import HIGH_WATERMARK_FILE, write_offsets
from segments.config import LogConfig
from segments.errors import InvalidArgumentError, OffsetOutOfRangeError
from segments.log import PartitionLog
from segments.reader import SegmentReader, high_watermarks, partition_directories
from tests.segments.helpers import batch_of, read_all

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=200, flush="never", retention_ms=-1)


def fingerprint(path: str) -> dict[str, str]:
    return {n: hashlib.sha256(open(os.path.join(path, n), "rb").read()).hexdigest() for n in sorted(os.listdir(path))}


@pytest.fixture
def written(tmp_path):
    path = str(tmp_path / "events-0")
    with PartitionLog.open(path, CONFIG) as log:
        for i in range(120):
            log.append(batch_of([f"e{i}-{j}".encode() for j in range(1 + i % 3)], timestamp=5000 + i,
                                key=b"k"), leader_epoch=0)
        expected = read_all(log)
    return path, expected


def test_reads_every_record_and_changes_nothing(written):
    path, expected = written
    before = fingerprint(path)
    reader = SegmentReader(path)
    records = list(reader.iter_records())
    assert [(r.offset, r.value) for r in records] == expected
    assert all(r.key == b"k" for r in records)
    assert reader.log_start_offset() == 0 and reader.log_end_offset() == len(expected)
    assert fingerprint(path) == before


@pytest.mark.parametrize("start,end", [(0, 1), (5, 17), (100, 100), (150, None), (17, 230)])
def test_offset_ranges_are_exact(written, start, end):
    path, expected = written
    got = [(r.offset, r.value) for r in SegmentReader(path).iter_records(start, end)]
    assert got == [(o, v) for o, v in expected if o >= start and (end is None or o < end)]


def test_bad_ranges_raise(written):
    path, _ = written
    reader = SegmentReader(path)
    with pytest.raises(InvalidArgumentError):
        list(reader.iter_records(-1))
    with pytest.raises(InvalidArgumentError):
        list(reader.iter_records(10, 5))
    with pytest.raises(InvalidArgumentError):
        SegmentReader(os.path.join(path, "missing"))


def test_reads_beside_a_live_writer_and_after_retention(tmp_path):
    path = str(tmp_path / "live-0")
    config = LogConfig(segment_bytes=1024, retention_bytes=2048, retention_ms=-1, flush="never")
    log = PartitionLog.open(path, config)
    try:
        for i in range(100):
            log.append(batch_of([f"v{i}".encode() * 10], timestamp=1000 + i), leader_epoch=0)
        reader = SegmentReader(path)
        assert [r.offset for r in reader.iter_records()] == list(range(100))
        log.apply_retention()
        start = log.log_start_offset
        assert start > 0
        with pytest.raises(OffsetOutOfRangeError):
            list(reader.iter_records(0))
        assert [r.offset for r in reader.iter_records(start)] == list(range(start, 100))
    finally:
        log.close()


def test_a_write_in_progress_is_the_end_not_an_error(written):
    path, expected = written
    last = sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1]
    with open(os.path.join(path, last), "ab") as f:
        f.write(batch_of([b"partial"])[:30])
    assert [(r.offset, r.value) for r in SegmentReader(path).iter_records()] == expected


def test_high_watermarks_and_partition_directories(tmp_path):
    for p in range(3):
        os.makedirs(tmp_path / f"orders-{p}")
    os.makedirs(tmp_path / "orders-x-0")
    os.makedirs(tmp_path / "other-1")
    write_offsets(str(tmp_path / HIGH_WATERMARK_FILE), {("orders", 0): 10, ("orders", 2): 7})
    dirs = partition_directories(str(tmp_path), "orders")
    assert sorted(dirs) == [0, 1, 2] and dirs[1].endswith("orders-1")
    assert high_watermarks(str(tmp_path)) == {("orders", 0): 10, ("orders", 2): 7}


def test_an_opener_reads_batches_encrypted_at_rest_and_without_one_they_are_refused(tmp_path):
    from functools import partial

    from segments.batch import ProducerRecord, encode_batch
    from segments.encryption import open_batches, seal_batch
    from segments.errors import UndecryptableBatchError
    from segments.key_ring import KeyRing

    ring = KeyRing({1: os.urandom(32)}, 1)
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig())
    try:
        for i in range(5):
            batch = encode_batch([ProducerRecord(b"v%d" % i)])
            log.append(seal_batch(batch, ring, os.urandom(12)) if i % 2 else batch, leader_epoch=0)
    finally:
        log.close()
    reader = SegmentReader(str(tmp_path / "t-0"))
    opened = [r.value for r in reader.iter_records(opener=partial(open_batches, ring=ring))]
    assert opened == [b"v%d" % i for i in range(5)]
    with pytest.raises(UndecryptableBatchError):
        list(reader.iter_records())
