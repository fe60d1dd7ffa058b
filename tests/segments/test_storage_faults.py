"""The partition log under storage faults: a full disk (short writes, then ENOSPC), a write error
that cannot be cut back, and failed fsyncs on a rolled and on the active segment.

The faults are injected into ``os.write``/``os.writev`` (a byte budget shared by every file, as a
full disk is) and through the log's ``fsync`` hook. A crash is simulated by opening the directory
again without closing the first log (no flush, no clean-shutdown mark).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments.config import LogConfig
from segments.errors import LogOfflineError, StorageFullError
from segments.group_commit import GroupCommit
from segments.log import CLEAN_SHUTDOWN_FILE, PartitionLog
from tests.segments.helpers import batch_of, read_all

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128, flush="never")


class Disk:
    """A byte budget for every write in the process; ``None`` is an unbounded disk. Like the
    kernel, a write that does not fit writes what fits and returns the short count; a write when
    nothing fits raises ENOSPC."""

    def __init__(self) -> None:
        self.free: int | None = None
        self._write = os.write
        self._writev = os.writev

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return self._writev(fd, [data]) if self.free is None else self.writev(fd, [data])

    def writev(self, fd: int, buffers: list[bytes | memoryview]) -> int:
        if self.free is None:
            return self._writev(fd, buffers)
        data = b"".join(bytes(b) for b in buffers)
        if data and self.free == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = self._write(fd, data[: self.free])
        self.free -= written
        return written


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    fake = Disk()
    monkeypatch.setattr(os, "write", fake.write)
    monkeypatch.setattr(os, "writev", fake.writev)
    yield fake
    fake.free = None


def crash_and_reopen(path: str, config: LogConfig = SMALL, recovery_point: int = 0) -> PartitionLog:
    assert not os.path.exists(os.path.join(path, CLEAN_SHUTDOWN_FILE))
    return PartitionLog.open(path, config, recovery_point=recovery_point)


def values(n: int, prefix: str) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def test_full_disk_cuts_the_torn_batch_and_later_appends_survive_a_crash(tmp_path, disk):
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, SMALL)
    acked: list[bytes] = []
    for i in range(3):
        log.append(batch_of(values(4, f"a{i}")), leader_epoch=0)
        acked += values(4, f"a{i}")
    size_before, end_before = log.size_bytes, log.log_end_offset
    disk.free = 50  # less than a batch: the write is short, then ENOSPC
    with pytest.raises(StorageFullError):
        log.append(batch_of(values(4, "lost")), leader_epoch=0)
    assert log.size_bytes == size_before and log.log_end_offset == end_before
    assert log.offline_reason is None
    disk.free = None  # space returns: appends go on at once
    for i in range(30):
        log.append(batch_of(values(4, f"b{i}")), leader_epoch=0)
        acked += values(4, f"b{i}")
    reopened = crash_and_reopen(path)
    assert reopened.recovery is not None and reopened.recovery.truncated_bytes == 0
    assert [v for _, v in read_all(reopened)] == acked
    reopened.close()


def test_a_full_disk_during_a_roll_leaves_the_old_segment_active(tmp_path, disk):
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, SMALL)
    while log.segment_count == 1 or log.size_bytes < 2 * 1024 - 200:
        log.append(batch_of(values(8, "x")), leader_epoch=0)
    files_before = sorted(os.listdir(path))
    segments_before, end_before = log.segment_count, log.log_end_offset
    disk.free = 0  # the roll's index trim (or the batch) cannot be written
    for _ in range(5):
        with pytest.raises(StorageFullError):
            log.append(batch_of(values(8, "y")), leader_epoch=0)
    assert log.segment_count == segments_before and log.log_end_offset == end_before
    assert sorted(os.listdir(path)) == files_before
    disk.free = None
    for _ in range(10):
        log.append(batch_of(values(8, "z")), leader_epoch=0)
    expected = [v for _, v in read_all(log)]
    reopened = crash_and_reopen(path)
    assert [v for _, v in read_all(reopened)] == expected
    assert reopened.recovery is not None and reopened.recovery.truncated_bytes == 0
    reopened.close()


def test_a_roll_whose_second_index_cannot_be_written_keeps_the_old_segment_whole(tmp_path, disk):
    """The offset index file fits, the time index file does not: the roll fails, both indexes
    stay writable, and a smaller batch that still fits the old segment is appended correctly."""
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, LogConfig(segment_bytes=1024, index_interval_bytes=1, flush="never"))
    while log.size_bytes < 700:
        log.append(batch_of([b"x" * 60]), leader_epoch=0)
    entries = log.log_end_offset  # one index entry per batch of one record
    disk.free = entries * 8 + 4  # the offset index (8-byte entries) and a little of the time index
    with pytest.raises(StorageFullError):
        log.append(batch_of([b"y" * 400]), leader_epoch=0)  # does not fit: a roll
    disk.free = None
    assert log.segment_count == 1
    small = [log.append(batch_of([b"z"]), leader_epoch=0) for _ in range(3)]  # fits: no roll
    assert [i.base_offset for i in small] == [entries, entries + 1, entries + 2]
    expected = [v for _, v in read_all(log)]
    assert expected[-3:] == [b"z"] * 3
    reopened = crash_and_reopen(path, LogConfig(segment_bytes=1024, index_interval_bytes=1, flush="never"))
    assert [v for _, v in read_all(reopened)] == expected
    assert reopened.recovery is not None and reopened.recovery.truncated_bytes == 0
    reopened.close()


def test_after_a_crash_the_first_flush_syncs_every_recovered_segment(tmp_path):
    """Segments the crashed process wrote past the recovery point may not be on disk: the first
    flush after the restart syncs them all before the recovery point passes them."""
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    while log.segment_count < 4:
        log.append(batch_of(values(8, "v")), leader_epoch=0)
    path = str(tmp_path / "crashed")
    shutil.copytree(log.directory, path)  # the files as the killed process left them
    log.close()
    synced: list[str] = []

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        os.fsync(fd)

    reopened = PartitionLog.open(path, SMALL, recovery_point=0, fsync=fsync)
    synced.clear()
    assert reopened.flush() == reopened.log_end_offset
    segment_files = sorted(n for n in os.listdir(path) if n.endswith(".log"))
    assert sorted(n for n in synced if n.endswith(".log")) == segment_files
    reopened.close()


def test_a_full_disk_while_a_new_epoch_is_recorded_changes_nothing(tmp_path, disk):
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    log.append(batch_of([b"a"]), leader_epoch=0)
    disk.free = 0
    with pytest.raises(StorageFullError):
        log.append(batch_of([b"b"]), leader_epoch=3)
    assert log.latest_epoch == 0 and log.epoch_entries() == [(0, 0)]
    disk.free = None
    log.append(batch_of([b"c"]), leader_epoch=3)
    assert log.epoch_entries() == [(0, 0), (3, 1)]
    log.close()


def test_a_torn_write_that_cannot_be_cut_back_takes_the_log_offline(tmp_path, disk, monkeypatch):
    path = str(tmp_path / "t-0")
    log = PartitionLog.open(path, SMALL)
    log.append(batch_of([b"kept"]), leader_epoch=0)

    def refuse(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", refuse)
    disk.free = 20
    with pytest.raises(LogOfflineError, match="could not be cut back"):
        log.append(batch_of([b"torn"]), leader_epoch=0)
    monkeypatch.undo()
    assert log.offline_reason is not None
    with pytest.raises(LogOfflineError):
        log.append(batch_of([b"after"]), leader_epoch=0)
    with pytest.raises(LogOfflineError):
        log.read(0, 1 << 20)
    with pytest.raises(LogOfflineError):
        log.flush()
    log.close()
    assert not os.path.exists(os.path.join(path, CLEAN_SHUTDOWN_FILE))
    reopened = crash_and_reopen(path)
    assert [v for _, v in read_all(reopened)] == [b"kept"]
    reopened.close()


def failing_fsync(should_fail: Callable[[str], bool]) -> tuple[Callable[[int], None], list[str]]:
    """An fsync that fails (EIO) for files whose path ``should_fail`` picks; records them."""
    failed: list[str] = []

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if should_fail(target):
            failed.append(target)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)

    return fsync, failed


def test_a_failed_fsync_on_a_rolled_segment_keeps_the_recovery_point_below_it(tmp_path):
    path = str(tmp_path / "t-0")
    armed = {"on": False}
    fsync, failed = failing_fsync(lambda target: armed["on"] and target.endswith("00000000000000000000.log"))
    log = PartitionLog.open(path, SMALL, fsync=fsync)
    log.append(batch_of([b"first"]), leader_epoch=0)
    assert log.flush() == 1
    while log.segment_count < 3:
        log.append(batch_of(values(8, "v")), leader_epoch=0)
    expected = [v for _, v in read_all(log)]
    armed["on"] = True
    with pytest.raises(LogOfflineError, match="fsync failed"):
        log.flush()
    assert failed and log.recovery_point == 1
    armed["on"] = False  # a later fsync would succeed: it must not be asked, nor trusted
    with pytest.raises(LogOfflineError):
        log.flush()
    assert log.recovery_point == 1
    with pytest.raises(LogOfflineError):
        log.append(batch_of([b"refused"]), leader_epoch=0)
    with pytest.raises(LogOfflineError):
        log.read(0, 1 << 20)
    log.close()
    reopened = crash_and_reopen(path, recovery_point=log.recovery_point)
    assert reopened.recovery is not None and reopened.recovery.segments_recovered >= 2
    assert [v for _, v in read_all(reopened)] == expected
    reopened.close()


def test_a_failed_fsync_on_the_active_segment_fails_the_waiters_and_every_later_commit(tmp_path):
    import asyncio

    path = str(tmp_path / "t-0")
    armed = {"on": False}
    fsync, _ = failing_fsync(lambda target: armed["on"] and target.endswith(".log"))
    log = PartitionLog.open(path, LogConfig(flush="always"), fsync=fsync)

    async def scenario() -> None:
        commit = GroupCommit(log, None)
        first = log.append(batch_of([b"durable"]), leader_epoch=0, flush=False)
        await commit.wait_durable(first.last_offset)
        armed["on"] = True
        second = log.append(batch_of([b"not durable"]), leader_epoch=0, flush=False)
        with pytest.raises(LogOfflineError):
            await commit.wait_durable(second.last_offset)
        armed["on"] = False
        with pytest.raises(LogOfflineError):
            await commit.wait_durable(second.last_offset)

    asyncio.run(scenario())
    assert log.recovery_point == 1 and log.offline_reason is not None
    log.close()
    assert not os.path.exists(os.path.join(path, CLEAN_SHUTDOWN_FILE))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.one_of(st.none(), st.integers(min_value=0, max_value=400)),
                                st.integers(min_value=1, max_value=30)), min_size=1, max_size=40))
def test_acknowledged_batches_survive_any_sequence_of_full_disk_failures(tmp_path_factory, disk, plan):
    """Each step appends one batch of a drawn size; an integer is the free space at that moment
    (the write, or the roll before it, may be torn or refused). Whatever was acknowledged is
    exactly what a crash-restart reads back."""
    path = str(tmp_path_factory.mktemp("faults") / "t-0")
    log = PartitionLog.open(path, SMALL)
    acked: list[bytes] = []
    for step, (free, records) in enumerate(plan):
        disk.free = free
        batch = values(records, f"s{step}")
        try:
            log.append(batch_of(batch), leader_epoch=0)
        except StorageFullError:
            continue
        finally:
            disk.free = None
        acked += batch
    assert [v for _, v in read_all(log)] == acked
    reopened = crash_and_reopen(path)
    assert [v for _, v in read_all(reopened)] == acked
    assert reopened.recovery is not None and reopened.recovery.truncated_bytes == 0
    reopened.close()
