"""Key-based compaction: the pure rules of ``segments.compaction`` and one pass of ``segments.cleaner``."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from segments.batch import ProducerRecord, decode_records, encode_batch, parse_header, validate_batch
from segments.cleaner import HANDOVER_S, PassResult, Throttle, compact
from segments.cleaner_files import CLEANING_DIR, SWAP_DIR
from segments.compaction import compact_batch, latest_offsets
from segments.config import LogConfig
from segments.encryption import is_sealed, open_batch, seal_batch
from segments.errors import InvalidArgumentError, StorageError
from segments.key_ring import KeyRing, new_key
from segments.log import PartitionLog
from tests.segments.compaction_helpers import keyed_batch, latest_values, read_records

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=0, flush="never", cleanup_policy="compact",
                   delete_retention_ms=1000)


def _batch(rows: list[tuple[bytes | None, bytes | None]], base: int, *, sequence: int = -1) -> bytes:
    return encode_batch([ProducerRecord(v, key=k, timestamp=100 + i) for i, (k, v) in enumerate(rows)],
                        base_offset=base, leader_epoch=3, producer_id=7 if sequence >= 0 else -1,
                        producer_epoch=1 if sequence >= 0 else -1, base_sequence=sequence)


def test_a_batch_keeping_every_record_keeps_its_bytes() -> None:
    batch = _batch([(b"a", b"1"), (b"b", b"2")], 10)
    header = parse_header(batch)
    kept, stats = compact_batch(batch, header, {b"a": 10, b"b": 11}, tombstone_before_ms=0)
    assert kept == [batch] and stats.records_kept == 2 and stats.batches_rewritten == 0


def test_a_batch_with_holes_becomes_one_batch_per_run_with_offsets_and_producer_kept() -> None:
    batch = _batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (None, b"x"), (b"c", b"5")], 20, sequence=40)
    header = parse_header(batch)
    latest = latest_offsets([(header, batch)])
    latest[b"b"] = 99  # superseded by a later batch
    kept, stats = compact_batch(batch, header, latest, tombstone_before_ms=0)
    assert stats.records_in == 5 and stats.records_kept == 3 and stats.batches_rewritten == 1
    (run,) = kept
    out = validate_batch(run)
    assert (out.base_offset, out.leader_epoch) == (22, 3)
    assert (out.producer_id, out.producer_epoch, out.base_sequence) == (7, 1, 42)
    records = decode_records(run)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (22, b"a", b"3", 102), (23, None, b"x", 103), (24, b"c", b"5", 104)]
    split, _ = compact_batch(batch, header, {b"a": 20, b"b": 99, b"c": 24}, tombstone_before_ms=0)
    assert [validate_batch(b).base_offset for b in split] == [20, 23]


def test_tombstones_stay_until_delete_retention_then_go() -> None:
    batch = _batch([(b"a", b"1"), (b"a", None)], 0)
    header = parse_header(batch)
    latest = latest_offsets([(header, batch)])
    kept, _ = compact_batch(batch, header, latest, tombstone_before_ms=101)
    assert [(r.offset, r.value) for r in decode_records(kept[0])] == [(1, None)]
    gone, stats = compact_batch(batch, header, latest, tombstone_before_ms=102)
    assert gone == [] and stats.records_kept == 0


def test_sealed_batches_are_opened_and_sealed_again_or_kept_without_a_ring() -> None:
    ring = KeyRing({1: new_key()}, 1)
    sealed = bytes(seal_batch(_batch([(b"a", b"1"), (b"a", b"2")], 5), ring, os.urandom(12)))
    header = parse_header(sealed)
    assert latest_offsets([(header, sealed)]) == {}
    latest = latest_offsets([(header, sealed)], opener=lambda b: open_batch(b, ring))
    untouched, _ = compact_batch(sealed, header, latest, tombstone_before_ms=0)
    assert untouched == [sealed]
    kept, stats = compact_batch(sealed, header, latest, tombstone_before_ms=0, opener=lambda b: open_batch(b, ring),
                                sealer=lambda b: seal_batch(b, ring, os.urandom(12)))
    assert stats.records_kept == 1 and is_sealed(parse_header(kept[0]))
    assert [(r.offset, r.value) for r in decode_records(bytes(open_batch(kept[0], ring)))] == [(6, b"2")]


def test_config_takes_both_policies_and_the_compaction_settings() -> None:
    config = LogConfig.from_mapping({"cleanup_policy": "delete,compact", "min_cleanable_dirty_ratio": "0.25",
                                     "retention_ms": 5000, "delete_retention_ms": 10})
    assert config.cleanup_policy == "compact,delete" and config.compacts and config.deletes
    assert config.retention_ms == 5000 and config.min_cleanable_dirty_ratio == 0.25
    assert LogConfig(cleanup_policy="compact", retention_ms=5).retention_ms == -1
    for bad in ({"min_cleanable_dirty_ratio": 1.5}, {"min_cleanable_dirty_ratio": "x"},
                {"cleanup_policy": "compact,compact"}, {"max_compaction_lag_ms": 0}, {"delete_retention_ms": -1}):
        with pytest.raises(InvalidArgumentError):
            LogConfig.from_mapping(bad)


def _filled(tmp_path: Path, clock: list[int], fsync: Callable[[int], None] = os.fsync) -> PartitionLog:
    log = PartitionLog.open(str(tmp_path), CONFIG, clock_ms=lambda: clock[0], fsync=fsync)
    for i in range(30):
        log.append(keyed_batch([(b"k%d" % (i % 3), b"v%d" % i)], timestamp=100 + i), leader_epoch=0)
    log.append(keyed_batch([(b"k0", None)], timestamp=200), leader_epoch=0)
    log.roll()
    log.append(keyed_batch([(b"k1", b"new")], timestamp=300), leader_epoch=0)
    log.flush()
    return log


def test_a_pass_keeps_the_latest_per_key_with_offsets_unchanged_and_survives_reopen(tmp_path: Path) -> None:
    clock = [1000]
    log = _filled(tmp_path, clock)
    before = read_records(log)
    end, segments = log.log_end_offset, log.segment_count
    assert log.dirty_ratio() == 1.0
    result = compact(log, now_ms=clock[0])
    assert result is not None and result.swapped and result.records_removed > 0
    after = read_records(log)
    by_offset = {r.offset: r for r in before}
    assert all(by_offset[r.offset] == r for r in after)
    assert [r.offset for r in after] == [28, 29, 30, 31]  # k1 v28, k2 v29, the k0 tombstone, active k1
    assert latest_values(after) == latest_values(before) == {b"k1": b"new", b"k2": b"v29"}
    assert log.log_end_offset == end and log.segment_count <= segments and log.dirty_ratio() == 0.0
    assert not os.path.exists(os.path.join(str(tmp_path), CLEANING_DIR))
    assert not os.path.exists(os.path.join(str(tmp_path), SWAP_DIR))
    log.close()
    reopened = PartitionLog.open(str(tmp_path), CONFIG)
    assert reopened.recovery is not None and reopened.recovery.segments_recovered == 0
    assert read_records(reopened) == after
    reopened.close()


def test_appends_and_cuts_above_a_swap_go_on_while_it_waits_for_a_slow_fsync(tmp_path: Path) -> None:
    """The swap's commit fsync blocks (a slow disk): an append, a read and a truncation above the
    segments being replaced (a follower cuts only above its high watermark, a pass compacts only
    below it) go on meanwhile; a truncation that reaches those segments waits for the swap."""
    clock = [1000]
    in_fsync, release = threading.Event(), threading.Event()
    slow = [False]

    def fsync(fd: int) -> None:
        if slow[0]:
            in_fsync.set()
            release.wait(10)
        os.fsync(fd)

    log = _filled(tmp_path, clock, fsync)
    end = log.log_end_offset
    slow[0] = True
    results: list[Any] = []
    swapping = threading.Thread(target=lambda: results.append(compact(log, now_ms=clock[0])))
    swapping.start()
    truncated: list[int] = []
    try:
        assert in_fsync.wait(10), "the swap reached its commit's fsync"
        slow[0] = False
        started = time.monotonic()
        log.append(keyed_batch([(b"k3", b"during")], timestamp=400), leader_epoch=0)
        assert log.read(0, 1 << 20).data, "a read goes on too"
        assert log.truncate_to(end) == end, "a cut above the swapped segments"
        assert time.monotonic() - started < 5 and swapping.is_alive(), "they waited for the fsync"
        cutting = threading.Thread(target=lambda: truncated.append(log.truncate_to(1)))
        cutting.start()
        cutting.join(0.3)
        assert cutting.is_alive() and not truncated, "a truncation does not cut into a swap under way"
    finally:
        release.set()
        swapping.join(10)
    cutting.join(10)
    assert results and results[0] is not None and results[0].swapped
    assert truncated and truncated[0] <= 1 and log.log_end_offset == truncated[0]
    log.close()


def test_a_failure_after_the_commit_takes_the_log_offline_and_the_next_start_finishes_the_swap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of descriptors while the compacted segments are opened again (after the renames): the
    log goes offline, as for any failure past the commit, and the committed swap is finished when
    the log is opened again."""
    import segments.log_compaction_side as log_module

    clock = [1000]
    log = _filled(tmp_path, clock)
    before = latest_values(read_records(log))

    def no_descriptors(*args: Any, **kwargs: Any) -> Any:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(log_module, "reopen_swapped", no_descriptors)
    with pytest.raises(StorageError):
        compact(log, now_ms=clock[0])
    monkeypatch.undo()
    assert log.offline_reason is not None and "compaction swap failed" in log.offline_reason
    log.close()
    reopened = PartitionLog.open(str(tmp_path), CONFIG)
    assert latest_values(read_records(reopened)) == before == {b"k1": b"new", b"k2": b"v29"}
    assert not {CLEANING_DIR, SWAP_DIR} & set(os.listdir(str(tmp_path)))
    reopened.close()


def test_a_swap_fsyncs_nothing_under_the_log_lock_and_in_the_order_crash_safety_needs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends wait for the log's lock on the event loop, so a slow disk's fsyncs under it stop
    the node: the swap's commit, its renames' and the swap directory's removal's fsyncs all come
    with the lock let go (the pass fsynced the cleaning directory before, with its own fsync).
    And in this order (decision 0322): the commit's rename, its fsync, then the files' renames,
    their fsync, then the swap directory's removal and its fsync."""
    clock = [1000]
    steps: list[str] = []
    log: PartitionLog | None = None

    def fsync(fd: int) -> None:
        steps.append("fsync under the lock" if log is not None and log._lock.locked() else "fsync")
        os.fsync(fd)

    log = _filled(tmp_path, clock, fsync)
    steps.clear()
    rename, replace, rmtree = os.rename, os.replace, shutil.rmtree

    def recorded(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def step(path: Any, *args: Any, **kwargs: Any) -> Any:
            if CLEANING_DIR in str(path) or SWAP_DIR in str(path):
                steps.append(name)
            return call(path, *args, **kwargs)
        return step

    monkeypatch.setattr(os, "rename", recorded("commit", rename))
    monkeypatch.setattr(os, "replace", recorded("rename", replace))
    monkeypatch.setattr(shutil, "rmtree", recorded("remove", rmtree))
    result = compact(log, now_ms=clock[0])
    monkeypatch.undo()
    assert result is not None and result.swapped
    swap = steps[steps.index("commit"):]
    renames = [i for i, step in enumerate(swap) if step == "rename"]
    assert renames and swap[:renames[0]] == ["commit", "fsync"], swap
    assert swap[renames[-1] + 1:] == ["fsync", "remove", "fsync"], swap
    assert "fsync under the lock" not in steps, steps
    log.close()
    reopened = PartitionLog.open(str(tmp_path), CONFIG)
    assert latest_values(read_records(reopened)) == {b"k1": b"new", b"k2": b"v29"}
    reopened.close()


def test_tombstones_go_after_delete_retention_and_appends_go_on(tmp_path: Path) -> None:
    clock = [1000]
    log = _filled(tmp_path, clock)
    compact(log, now_ms=clock[0])
    again = compact(log, now_ms=clock[0])
    assert again is not None and not again.swapped and again.segments_rewritten == 0
    compact(log, now_ms=200 + CONFIG.delete_retention_ms + 1)
    # The k0 tombstone at 30 is old enough but the last record of the closed segments: it stays,
    # so that no gap ends them while the active segment holds nothing after it.
    assert [r.offset for r in read_records(log)] == [28, 29, 30, 31]
    log.roll()
    log.append(keyed_batch([(b"k9", b"x")], timestamp=400), leader_epoch=0)
    log.flush()
    compact(log, now_ms=200 + CONFIG.delete_retention_ms + 1)
    assert [r.offset for r in read_records(log)] == [29, 31, 32]  # k1 v28 superseded, the tombstone gone
    info = log.append(keyed_batch([(b"k9", b"y")], timestamp=400), leader_epoch=0)
    assert info.base_offset == 33


def test_nothing_cleanable_before_the_min_lag_nor_the_active_segment(tmp_path: Path) -> None:
    log = PartitionLog.open(str(tmp_path), LogConfig.from_mapping({"min_compaction_lag_ms": 10_000}, CONFIG))
    log.append(keyed_batch([(b"a", b"1"), (b"a", b"2")], timestamp=100), leader_epoch=0)
    log.flush()
    assert compact(log, now_ms=5000) is None  # only the active segment
    log.roll()
    log.flush()
    assert compact(log, now_ms=5000) is None  # within the lag
    assert compact(log, now_ms=20_000) is not None
    assert [r.value for r in read_records(log)] == [b"2"]
    log.close()


def test_a_pass_whose_segments_changed_meanwhile_changes_nothing(tmp_path: Path) -> None:
    clock = [1000]
    log = _filled(tmp_path, clock)
    cleanable = log.cleanable_segments(clock[0])
    for item in cleanable:
        os.close(item.fd)
    log.truncate_fully_and_start_at(50)
    assert log.swap_cleaned(cleanable, os.path.join(str(tmp_path), CLEANING_DIR), 40) is False
    log.close()


def test_throttle_spaces_the_bytes_out_at_its_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    throttle = Throttle(1000, clock=lambda: now[0], sleep=sleep)
    for _ in range(4):
        throttle.spend(500)
    assert now[0] == pytest.approx(2.0)
    Throttle(0, clock=lambda: now[0], sleep=sleep).spend(10**9)
    assert len(slept) == 4


def test_an_unbounded_pass_still_sleeps_briefly_after_each_stretch_of_work() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    throttle = Throttle(0, clock=lambda: now[0], sleep=sleep)
    for _ in range(10):  # 10 batches of 0.4 ms of work each: a hand-over after every 1 ms or more
        now[0] += 0.0004
        throttle.spend(1000)
    assert slept == [HANDOVER_S] * 3
    bounded = Throttle(10_000, clock=lambda: now[0], sleep=sleep)
    slept.clear()
    for _ in range(3):  # a pass held back by its rate sleeps for the rate alone
        now[0] += 0.002
        bounded.spend(1000)
    assert slept == pytest.approx([0.1, 0.1, 0.1])


def test_appends_and_reads_go_on_while_a_pass_runs_and_the_swap_keeps_them(tmp_path: Path) -> None:
    clock = [1000]
    log = _filled(tmp_path, clock)
    started, release = threading.Event(), threading.Event()

    def held(_seconds: float) -> None:  # the throttle's sleep: the pass waits here until released
        started.set()
        assert release.wait(30)

    throttle = Throttle(1, clock=lambda: 0.0, sleep=held)
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.append(compact(log, now_ms=clock[0], throttle=throttle)))
    runner.start()
    assert started.wait(30)
    for i in range(5):  # the pass holds no lock while it reads and writes
        log.append(keyed_batch([(b"k2", b"during%d" % i)], timestamp=400), leader_epoch=0)
    assert read_records(log)[-1].value == b"during4"
    release.set()
    runner.join(30)
    assert not runner.is_alive()
    (result,) = results
    assert isinstance(result, PassResult) and result.swapped
    records = read_records(log)
    assert [r.offset for r in records][-5:] == [32, 33, 34, 35, 36]
    assert latest_values(records) == {b"k1": b"new", b"k2": b"during4"}
    log.close()
