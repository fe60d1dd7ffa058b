"""The leader epoch history is made durable by the flush, not on the append path (decision 0401):
an epoch change writes ``leader-epoch-checkpoint.pending`` without fsync; ``flush`` fsyncs it and
renames it over the checkpoint before the recovery point passes the batches; on open a readable
pending file is taken, and the epochs of the batches past the recovery point come from their
headers. So a slow disk does not hold the event loop at each leader change, and a crash that
loses the unsynced pending file loses no epoch."""

from __future__ import annotations

import os
import shutil
import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from segments.checkpoint import LEADER_EPOCH_FILE, read_epochs, write_epochs
from segments.config import LogConfig
from segments.log import PartitionLog
from segments.log_epochs import PENDING_SUFFIX, EpochHistory
from tests.segments.helpers import batch_of

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128, flush="never")


def _counting_fsync(calls: list[int]):  # type: ignore[no-untyped-def]
    def fsync(fd: int) -> None:
        calls.append(fd)
        os.fsync(fd)
    return fsync


def _crash(log: PartitionLog, dest: str, *, keep_pending: bool) -> str:
    """The files as a killed process leaves them; without the pending file when its data never
    reached the disk (it was not fsynced)."""
    shutil.copytree(log.directory, dest)
    pending = os.path.join(dest, LEADER_EPOCH_FILE + PENDING_SUFFIX)
    if not keep_pending and os.path.exists(pending):
        os.unlink(pending)
    return dest


def test_an_epoch_change_does_not_fsync_on_the_append_path_and_the_flush_makes_it_durable(tmp_path):
    calls: list[int] = []
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL, fsync=_counting_fsync(calls))
    log.append(batch_of([b"a"]), leader_epoch=1)
    log.append(batch_of([b"b"]), leader_epoch=4)
    assert calls == [], "no fsync while appending, new epochs included"
    assert log.epoch_entries() == [(1, 0), (4, 1)]
    checkpoint = os.path.join(log.directory, LEADER_EPOCH_FILE)
    assert not os.path.exists(checkpoint) or read_epochs(checkpoint) == []
    assert log.flush() == 2
    assert calls, "the flush fsyncs"
    assert read_epochs(checkpoint) == [(1, 0), (4, 1)], "the checkpoint holds every epoch below the point"
    assert not os.path.exists(checkpoint + PENDING_SUFFIX)
    calls.clear()
    assert log.flush() == 2 and len(calls) == 1, "nothing new: only the segment, the history is not synced again"
    log.close()


def test_an_epoch_change_does_not_wait_for_a_flush_whose_fsync_is_slow(tmp_path):
    """The flush thread's history sync fsyncs on a slow disk; meanwhile the event loop appends a
    new leadership's first batch (an epoch change, under the log's lock). It must not wait for that
    fsync; the change it wrote stays pending and the next flush makes it durable."""
    in_fsync, release = threading.Event(), threading.Event()

    def slow_fsync(fd: int) -> None:
        in_fsync.set()
        release.wait(10)
        os.fsync(fd)

    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    log.append(batch_of([b"a"]), leader_epoch=1)
    log._epochs._fsync = slow_fsync  # only the history's fsyncs are slow
    flusher = threading.Thread(target=log.flush)
    flusher.start()
    try:
        assert in_fsync.wait(10), "the flush reached the history's fsync"
        started = time.monotonic()
        log.append(batch_of([b"b"]), leader_epoch=2)  # the epoch change
        assert time.monotonic() - started < 5, "the append waited for the fsync"
        assert flusher.is_alive(), "the flush was still in its fsync"
    finally:
        release.set()
        flusher.join(10)
    checkpoint = os.path.join(log.directory, LEADER_EPOCH_FILE)
    assert read_epochs(checkpoint) == [(1, 0)], "the sync wrote what was written when it started"
    assert read_epochs(checkpoint + PENDING_SUFFIX) == [(1, 0), (2, 1)], "the change came after it: still pending"
    log._epochs._fsync = os.fsync
    assert log.flush() == 2
    assert read_epochs(checkpoint) == [(1, 0), (2, 1)]
    assert not os.path.exists(checkpoint + PENDING_SUFFIX)
    log.close()


def test_a_crash_that_lost_the_pending_file_takes_the_epochs_from_the_batches(tmp_path):
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    log.append(batch_of([b"a", b"b"]), leader_epoch=2)
    log.flush()  # epoch 2 durable; the recovery point at 2
    log.append(batch_of([b"c"]), leader_epoch=5)
    log.append(batch_of([b"d"]), leader_epoch=5)
    log.append(batch_of([b"e"]), leader_epoch=7)
    crashed = _crash(log, str(tmp_path / "crashed"), keep_pending=False)
    log.close()
    reopened = PartitionLog.open(crashed, SMALL, recovery_point=2)
    assert reopened.log_end_offset == 5
    assert reopened.epoch_entries() == [(2, 0), (5, 2), (7, 4)]
    assert read_epochs(os.path.join(crashed, LEADER_EPOCH_FILE)) == [(2, 0), (5, 2), (7, 4)], "made durable on open"
    reopened.close()


def test_a_torn_pending_file_is_ignored_and_a_readable_one_is_taken(tmp_path):
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    log.append(batch_of([b"a"]), leader_epoch=1)
    log.flush()
    log.append(batch_of([b"b"]), leader_epoch=3)
    torn = _crash(log, str(tmp_path / "torn"), keep_pending=True)
    readable = _crash(log, str(tmp_path / "readable"), keep_pending=True)
    log.close()
    with open(os.path.join(torn, LEADER_EPOCH_FILE + PENDING_SUFFIX), "wb") as f:
        f.write(b"1\n2\n1 ")
    for directory in (torn, readable):
        reopened = PartitionLog.open(directory, SMALL, recovery_point=1)
        assert reopened.epoch_entries() == [(1, 0), (3, 1)], directory
        assert not reopened.recovery.errors, "a torn pending file is no loss: the checkpoint and the batches stand"
        assert not os.path.exists(os.path.join(directory, LEADER_EPOCH_FILE + PENDING_SUFFIX))
        reopened.close()


def test_a_pending_file_that_a_truncation_wrote_is_overruled_by_the_batches_past_the_point(tmp_path):
    """A follower cut its divergent tail (epoch 5 from offset 2) and appended its new leader's
    epoch 6 there; the crash kept a stale pending file from before the cut, and the checkpoint from
    before both. The batches past the recovery point say what is true."""
    log = PartitionLog.open(str(tmp_path / "t-0"), SMALL)
    log.append(batch_of([b"a", b"b"]), leader_epoch=4)
    log.flush()
    log.append(batch_of([b"x"]), leader_epoch=5)
    stale = os.path.join(log.directory, LEADER_EPOCH_FILE + PENDING_SUFFIX)
    with open(stale, "rb") as f:
        before_cut = f.read()
    log.truncate_to(2)
    log.append(batch_of([b"c"]), leader_epoch=6)
    crashed = _crash(log, str(tmp_path / "crashed"), keep_pending=True)
    log.close()
    with open(os.path.join(crashed, LEADER_EPOCH_FILE + PENDING_SUFFIX), "wb") as f:
        f.write(before_cut)
    reopened = PartitionLog.open(crashed, SMALL, recovery_point=2)
    assert reopened.epoch_entries() == [(4, 0), (6, 2)]
    reopened.close()


@settings(max_examples=200, deadline=None)
@given(checkpoint=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 30)), max_size=5),
       runs=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1, max_size=6),
       scan_from=st.integers(0, 30))
def test_adopting_the_batches_epochs_gives_the_history_the_log_holds(tmp_path_factory, checkpoint, runs, scan_from):
    """Whatever the checkpoint said, after adopting the epoch starts of the batches from
    ``scan_from`` on, the history names, for every scanned offset, the epoch of its batch."""
    epochs, log_epochs = 0, []
    for step, length in runs:
        epochs += step
        log_epochs += [epochs] * length
    end = len(log_epochs)
    scan_from = min(scan_from, end - 1)
    starts = [(e, o) for o, e in enumerate(log_epochs)
              if o >= scan_from and (o == scan_from or log_epochs[o - 1] != e)]
    directory = str(tmp_path_factory.mktemp("h"))
    entries = sorted({o: e for e, o in checkpoint}.items())
    rows, latest = [], -1
    for o, e in entries:  # a valid checkpoint: epochs increase with offsets
        if e > latest:
            rows.append((e, o))
            latest = e
    write_epochs(os.path.join(directory, LEADER_EPOCH_FILE), rows)
    history = EpochHistory.load(directory, os.fsync, [], 0, end)
    history.adopt(starts)
    found = history.entries()
    assert [e for e, _ in found] == sorted({e for e, _ in found}), "epochs strictly increase"
    for o in range(scan_from, end):
        held = [e for e, s in found if s <= o]
        assert held and held[-1] == log_epochs[o], (o, found, log_epochs)
