"""PartitionLog behaviour on real files: append, read, roll, retention, truncation, epochs,
flush policies, and bad input that must raise a typed error and change nothing."""

from __future__ import annotations

import os

import pytest

from segments.batch import HEADER_SIZE, iter_batches, validate_batch
from segments.checkpoint import LEADER_EPOCH_FILE, read_epochs
from segments.config import LogConfig
from segments.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    InvalidArgumentError,
    InvalidBatchError,
    LogClosedError,
    NonSequentialAppendError,
    OffsetOutOfRangeError,
    StaleLeaderEpochError,
)
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128, flush="never")


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


@pytest.fixture
def log(tmp_path):
    with PartitionLog.open(str(tmp_path / "t-0"), SMALL) as opened:
        yield opened


def test_append_assigns_consecutive_offsets_and_reads_back(log):
    infos = [log.append(batch_of(values(3, f"b{i}-")), leader_epoch=0) for i in range(5)]
    assert [(i.base_offset, i.last_offset) for i in infos] == [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14)]
    assert log.log_end_offset == 15
    got = read_all(log)
    assert [o for o, _ in got] == list(range(15))
    assert got[4] == (4, b"b1-1")


def test_read_from_middle_of_batch_returns_whole_batch(log):
    log.append(batch_of(values(5)), leader_epoch=0)
    result = log.read(3, 1 << 20)
    assert result.first_offset == 0 and result.next_offset == 5
    assert validate_batch(result.data).base_offset == 0


def test_read_is_capped_by_bytes_but_returns_at_least_one_batch(log):
    for _ in range(10):
        log.append(batch_of(values(2)), leader_epoch=0)
    one = log.read(0, 1)
    assert len(list(iter_batches(one.data))) == 1 and one.next_offset == 2
    size = len(one.data)
    three = log.read(0, 3 * size + size // 2)
    assert len(three.data) == 3 * size and three.next_offset == 6


def test_read_stops_below_offset_max(log):
    for _ in range(4):
        log.append(batch_of(values(3)), leader_epoch=0)
    assert log.read(0, 1 << 20, offset_max=7).next_offset == 6
    assert len(log.read(6, 1 << 20, offset_max=7).data) == 0
    assert len(log.read(0, 1 << 20, offset_max=0).data) == 0


def test_read_at_log_end_is_empty_and_out_of_range_raises(log):
    log.append(batch_of(values(2)), leader_epoch=0)
    end = log.read(2, 100)
    assert len(end.data) == 0 and end.next_offset == 2
    with pytest.raises(OffsetOutOfRangeError) as err:
        log.read(3, 100)
    assert (err.value.earliest, err.value.latest) == (0, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", None, True])
def test_bad_read_arguments_raise(log, bad):
    log.append(batch_of(values(1)), leader_epoch=0)
    with pytest.raises(InvalidArgumentError):
        log.read(0, bad)
    if bad != -1:
        with pytest.raises(InvalidArgumentError):
            log.read(bad, 100)


def test_rolls_by_size_and_reads_across_segments(log):
    for i in range(60):
        log.append(batch_of([b"x" * 40], timestamp=1000 + i), leader_epoch=0)
    assert log.segment_count > 3
    assert [o for o, _ in read_all(log)] == list(range(60))
    assert [o for o, _ in read_all(log, start=37)] == list(range(37, 60))


def test_rolls_by_record_time(tmp_path):
    config = LogConfig(segment_ms=1000, flush="never")
    with PartitionLog.open(str(tmp_path / "t-0"), config) as log:
        log.append(batch_of([b"a"], timestamp=10_000), leader_epoch=0)
        log.append(batch_of([b"b"], timestamp=10_500), leader_epoch=0)
        assert log.segment_count == 1
        log.append(batch_of([b"c"], timestamp=11_000), leader_epoch=0)
        assert log.segment_count == 2


def test_rolls_when_index_is_full(tmp_path):
    config = LogConfig(segment_index_bytes=24, index_interval_bytes=0, flush="never")
    with PartitionLog.open(str(tmp_path / "t-0"), config) as log:
        for i in range(7):
            log.append(batch_of([b"x"], timestamp=1000 + i), leader_epoch=0)
        # 24 bytes hold 3 offset entries but only 2 time entries (12 bytes each): 2 per segment.
        assert log.segment_count == 4
        assert [o for o, _ in read_all(log)] == list(range(7))


def test_offset_for_timestamp(log):
    for i in range(40):
        log.append(batch_of(values(2), timestamp=1000 + 10 * i), leader_epoch=0)
    assert log.offset_for_timestamp(0) == 0
    assert log.offset_for_timestamp(1000) == 0
    assert log.offset_for_timestamp(1001) == 2
    assert log.offset_for_timestamp(1250) == 50
    assert log.offset_for_timestamp(1390) == 78
    assert log.offset_for_timestamp(1391) is None


def test_retention_by_bytes_deletes_only_whole_closed_segments(tmp_path):
    config = LogConfig(segment_bytes=1024, retention_bytes=2048, retention_ms=-1, flush="never")
    with PartitionLog.open(str(tmp_path / "t-0"), config) as log:
        for i in range(100):
            log.append(batch_of([b"y" * 50], timestamp=1000 + i), leader_epoch=0)
        before = log.segment_count
        deleted = log.apply_retention()
        assert 0 < deleted < before
        sizes = log.size_bytes
        assert sizes >= 2048 and sizes - 1024 < 2048
        start = log.log_start_offset
        assert start > 0 and [o for o, _ in read_all(log)] == list(range(start, 100))
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0, 100)


def test_retention_by_time_never_deletes_the_active_segment(tmp_path):
    now = [100_000]
    config = LogConfig(segment_bytes=512, retention_ms=1000, flush="never")
    with PartitionLog.open(str(tmp_path / "t-0"), config, clock_ms=lambda: now[0]) as log:
        for i in range(30):
            log.append(batch_of([b"z" * 40], timestamp=98_000 + i * 100), leader_epoch=0)
        assert log.apply_retention() > 0
        assert log.log_start_offset > 0
        now[0] = 10_000_000
        log.apply_retention()
        assert log.segment_count == 1 and log.log_end_offset == 30


def test_truncate_to_cuts_at_batch_boundary_and_appends_continue(log):
    for i in range(30):
        log.append(batch_of(values(3, f"{i}-")), leader_epoch=1 + i // 10)
    assert log.epoch_entries() == [(1, 0), (2, 30), (3, 60)]
    assert log.truncate_to(50) == 48
    assert log.epoch_entries() == [(1, 0), (2, 30)]
    assert [o for o, _ in read_all(log)] == list(range(48))
    info = log.append(batch_of([b"new"]), leader_epoch=4)
    assert info.base_offset == 48
    assert read_all(log)[-1] == (48, b"new")


def test_truncate_into_an_older_segment_makes_it_active_again(log):
    for i in range(80):
        log.append(batch_of([b"w" * 30], timestamp=1000 + i), leader_epoch=0)
    segments = log.segment_count
    assert segments > 3
    log.truncate_to(5)
    assert log.segment_count == 1 and log.log_end_offset == 5
    for i in range(80):
        log.append(batch_of([b"q" * 30], timestamp=2000 + i), leader_epoch=0)
    assert [o for o, _ in read_all(log)] == list(range(85))


def test_truncate_fully_and_start_at(log):
    log.append(batch_of(values(4)), leader_epoch=3)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.append(batch_of(values(2)), leader_epoch=3).base_offset == 1000
    assert read_all(log) == [(1000, b"v0"), (1001, b"v1")]


def test_epochs_persist_and_stale_epoch_is_refused_without_writing(tmp_path):
    path = str(tmp_path / "t-0")
    with PartitionLog.open(path, SMALL) as log:
        log.append(batch_of(values(2)), leader_epoch=5)
        log.append(batch_of(values(2)), leader_epoch=7)
        with pytest.raises(StaleLeaderEpochError):
            log.append(batch_of(values(2)), leader_epoch=6)
        assert log.log_end_offset == 4
        assert log.epoch_entries() == [(5, 0), (7, 2)]
    assert read_epochs(os.path.join(path, LEADER_EPOCH_FILE)) == [(5, 0), (7, 2)]


def test_append_replica_keeps_offsets_and_requires_sequence(tmp_path):
    with PartitionLog.open(str(tmp_path / "leader"), SMALL) as leader, \
            PartitionLog.open(str(tmp_path / "follower"), SMALL) as follower:
        for epoch in (1, 1, 2):
            leader.append(batch_of(values(3)), leader_epoch=epoch)
        offset = 0
        while offset < leader.log_end_offset:
            result = leader.read(offset, 1)
            follower.append_replica(result.data)
            offset = result.next_offset
        assert read_all(follower) == read_all(leader)
        assert follower.epoch_entries() == leader.epoch_entries() == [(1, 0), (2, 6)]
        with pytest.raises(NonSequentialAppendError):
            follower.append_replica(leader.read(0, 1).data)
        assert follower.log_end_offset == 9


def test_bad_batches_raise_and_write_nothing(log):
    log.append(batch_of(values(2)), leader_epoch=0)
    size = log.size_bytes
    good = bytearray(batch_of(values(3)))
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    with pytest.raises(CorruptBatchError):
        log.append(bytes(flipped), leader_epoch=0)
    with pytest.raises(InvalidBatchError):
        log.append(bytes(good[:-1]), leader_epoch=0)
    with pytest.raises(InvalidBatchError):
        log.append(b"", leader_epoch=0)
    with pytest.raises(InvalidBatchError):
        log.append(bytes(good[:HEADER_SIZE - 1]), leader_epoch=0)
    with pytest.raises(BatchTooLargeError):
        log.append(b"\0" * (SMALL.max_batch_bytes + 1), leader_epoch=0)
    assert log.size_bytes == size and log.log_end_offset == 2
    assert [o for o, _ in read_all(log)] == [0, 1]


@pytest.mark.parametrize("epoch", [-1, 2**32, 1.0, None])
def test_bad_leader_epoch_raises_and_writes_nothing(log, epoch):
    with pytest.raises(InvalidArgumentError):
        log.append(batch_of(values(1)), leader_epoch=epoch)
    assert log.log_end_offset == 0 and log.size_bytes == 0 and log.epoch_entries() == []


def test_closed_log_refuses_calls_and_close_is_idempotent(tmp_path):
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    log.append(batch_of(values(1)), leader_epoch=0)
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(batch_of(values(1)), leader_epoch=0)
    with pytest.raises(LogClosedError):
        log.read(0, 10)


def test_reopen_after_clean_close_keeps_everything_without_scanning(tmp_path):
    path = str(tmp_path / "t-0")
    with PartitionLog.open(path, SMALL) as log:
        for i in range(50):
            log.append(batch_of(values(2, f"{i}-"), timestamp=1000 + i), leader_epoch=0)
        expected = read_all(log)
    with PartitionLog.open(path, SMALL) as log:
        assert log.recovery is not None and log.recovery.clean_shutdown
        assert log.recovery.segments_recovered == 0
        assert read_all(log) == expected
        assert log.offset_for_timestamp(1025) == 50
        assert log.append(batch_of([b"more"]), leader_epoch=0).base_offset == 100


def test_slice_gives_a_descriptor_that_outlives_segment_deletion(tmp_path):
    config = LogConfig(segment_bytes=256, retention_bytes=0, retention_ms=-1, flush="never")
    with PartitionLog.open(str(tmp_path / "t-0"), config) as log:
        for i in range(20):
            log.append(batch_of([b"s" * 40], timestamp=1000 + i), leader_epoch=0)
        with log.slice(0, 1 << 20) as piece:
            expected = log.read(0, 1 << 20).data.tobytes()
            log.apply_retention()
            assert log.log_start_offset > 0
            assert piece.read() == expected and piece.first_offset == 0
        assert piece.fd == -1
        assert log.slice(log.log_end_offset, 100) is None


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_flush_policies_move_the_recovery_point(tmp_path, policy):
    now = [0]
    synced: list[int] = []

    def fsync(fd: int) -> None:
        synced.append(fd)
        os.fsync(fd)

    config = LogConfig(flush=policy, flush_ms=100)
    with PartitionLog.open(str(tmp_path / "t-0"), config, clock_ms=lambda: now[0], fsync=fsync) as log:
        log.append(batch_of(values(2)), leader_epoch=0)
        expected = {"always": 2, "interval": 0, "never": 0}[policy]
        assert log.recovery_point == expected
        synced.clear()  # the first append also wrote the leader epoch checkpoint
        now[0] = 150
        log.append(batch_of(values(2)), leader_epoch=0)
        expected = {"always": 4, "interval": 4, "never": 0}[policy]
        assert log.recovery_point == expected
        assert bool(synced) == (policy != "never")
        assert log.flush() == 4


def test_config_rejects_bad_values():
    with pytest.raises(InvalidArgumentError):
        LogConfig(segment_bytes=0)
    with pytest.raises(InvalidArgumentError):
        LogConfig(flush="sometimes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        LogConfig.from_mapping({"segment_bytez": 1})
    with pytest.raises(InvalidArgumentError):
        LogConfig.from_mapping({"retention_ms": "soon"})
    assert LogConfig.from_mapping({"retention_ms": "1000", "flush": "always"}).retention_ms == 1000
