"""The partition log: an ordered list of segments with one active (last) segment.

Invariants:
- segments are sorted by base offset and never overlap; offsets only grow;
- ``log_start_offset`` is the first segment's base, ``log_end_offset`` the active segment's next
  offset; only whole closed segments are deleted by retention, the active one never;
- every batch on disk passed ``validate_batch`` before it was written, and ``open`` re-checks
  every batch after the recovery point, so a read never returns a batch that fails its checksum;
- the leader epoch history covers every batch: an epoch is recorded before its first batch;
- nothing is ever appended after a partial batch: a failed write is cut back to the last whole
  batch (a full disk raises ``StorageFullError`` and the next append may succeed), and when it
  cannot be cut back the log goes offline;
- the recovery point only passes data whose fsync succeeded. A failed fsync takes the log offline
  for good in this process (its dirty pages may already be dropped, so a later fsync could
  "succeed" without them): appends, flushes and reads raise ``LogOfflineError``, nothing is
  deleted, and the next start recovers everything after the recovery point.

This module holds the log's state and every change to it: appends, rolls, flushes, retention,
truncation, the compaction swap's bookkeeping and closing, and the reads. Parts with one job each
live beside it, each taking only what the log passes it (never the log), with its own invariants:
``segments.log_recovery`` (what ``open`` finds on disk, ``RecoveryReport``),
``segments.log_epochs`` (the leader epoch history and its checkpoint file),
``segments.log_replicas`` (a follower's copies appended a run at a time),
``segments.log_reads`` (where a read finds its batches, ``LogRead``, ``LogSlice``) and
``segments.log_cleaning`` (the segments a compaction pass may take, the swap's file steps) and
``segments.log_compaction_side`` (``CompactionSide``: the log's own methods for a pass, its swap).
Their value types are re-exported here.

Concurrency: every public method takes ``self._lock`` (a ``threading.Lock``), so the log may be
used from the event loop and from one flush thread. ``flush`` runs fsync on duplicated
descriptors outside the lock so appends go on during it (group commit); a compaction swap
fsyncs outside it too, under ``self._swap_lock``, which every operation that drops or cuts
segments (retention, truncation, close, delete) takes before ``self._lock``: nothing fsyncs with
``self._lock`` held but ``close`` and an append that applies the flush policy itself (the node's
appends leave it to the flush thread). Helpers that need the lock held
end in ``_locked``. The parts have no lock of their own: the log calls them with its
lock held.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterator
from typing import NamedTuple, final

from segments.batch import PREFIX_SIZE, BatchHeader, now_ms, patched_prefix, validate_batch
from segments.checkpoint import write_atomic
from segments.cleaner_files import remove_compaction_dirs
from segments.config import LogConfig
from segments.errors import (
    BatchTooLargeError,
    InvalidArgumentError,
    LogClosedError,
    LogOfflineError,
    NonSequentialAppendError,
    StorageError,
    StorageFullError,
    TooManyOpenFilesError,
    check_int,
    is_fd_limit,
    is_no_space,
)
from segments.handles import LogHandles, SegmentHandles
from segments.log_compaction_side import CompactionSide
from segments.log_epochs import EpochHistory
from segments.log_reads import LogRead, LogSlice, candidates, find_extent, read_limit
from segments.log_recovery import CLEAN_SHUTDOWN_FILE, RecoveryReport, recover_locked
from segments.log_replicas import append_runs_locked
from segments.segment import LogSegment, SegmentWriteError, remove_empty_segment

__all__ = ["CLEAN_SHUTDOWN_FILE", "AppendInfo", "LogRead", "LogSlice", "PartitionLog", "RecoveryReport"]


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    log_end_offset: int


@final
class PartitionLog(CompactionSide):
    __slots__ = (
        "_clock_ms",
        "_closed",
        "_epochs",
        "_fsync",
        "_handles",
        "_last_flush_ms",
        "_lock",
        "_offline",
        "_recovery_point",
        "_swap_lock",
        "_truncations",
        "config",
        "directory",
        "recovery",
    )

    def __init__(self, directory: str, config: LogConfig, clock_ms: Callable[[], int],
                 fsync: Callable[[int], None], handles: SegmentHandles[LogSegment] | None) -> None:
        """Use ``PartitionLog.open``."""
        self.directory = directory
        self.config = config
        self._clock_ms = clock_ms
        self._fsync = fsync
        self._handles = None if handles is None else LogHandles(handles, self)
        self._lock = threading.Lock()
        self._swap_lock = threading.Lock()  # taken before ``_lock``: see ``swap_cleaned``
        self._swap_end: int | None = None  # while a swap runs: the end of the segments it replaces
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._epochs = EpochHistory(directory, fsync)
        self._recovery_point = 0
        self._unflushed: list[LogSegment] = []
        self._last_flush_ms = clock_ms()
        self._truncations = 0
        self._closed = False
        self._offline: str | None = None
        self._cleaned_offset = 0
        self.recovery: RecoveryReport | None = None

    # ---- opening (segments.log_recovery) ---------------------------------------------------

    @classmethod
    def open(cls, directory: str, config: LogConfig | None = None, *, recovery_point: int = 0,
             clock_ms: Callable[[], int] = now_ms, fsync: Callable[[int], None] = os.fsync,
             handles: SegmentHandles[LogSegment] | None = None) -> PartitionLog:
        """Open or create the log in ``directory``, recovering everything after ``recovery_point``
        unless the log was closed cleanly. Never fails on a torn or corrupt tail. ``handles`` is
        the node-wide budget of open sealed segments (None: every segment stays open)."""
        os.makedirs(directory, exist_ok=True)
        log = cls(directory, config or LogConfig(), clock_ms, fsync, handles)
        with log._lock:  # the budget may reach this log's sealed segments while it loads
            found = recover_locked(directory, fsync, recovery_point, log._segments, log._segment, log._add_segment)
            log._epochs, log._recovery_point, log._unflushed = found.epochs, found.recovery_point, found.unflushed
            log.recovery = found.report
        return log

    def _segment(self, base_offset: int) -> LogSegment:
        return LogSegment(self.directory, base_offset, self.config, fsync=self._fsync, handles=self._handles)

    def try_release(self, segment: LogSegment, *, held: bool) -> bool:
        """Close a sealed segment's files until its next use, for the descriptor budget: never
        the active segment, nor one whose fsync is due. ``held``: the caller holds this log's
        lock; otherwise it is taken only if free."""
        if not held and not self._lock.acquire(blocking=False):
            return False
        try:
            due = segment in self._unflushed and self.config.flush != "never"
            # Two budget rounds may both have picked ``segment``: the second finds it released.
            if self._closed or due or segment is self._segments[-1] or not segment.sealed or not segment.holds_files:
                return False
            segment.release()
            return True
        finally:
            if not held:
                self._lock.release()

    def _add_segment(self, segment: LogSegment) -> None:
        if self._segments:
            self._segments[-1].seal()
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    # ---- state -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size_bytes for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def offline_reason(self) -> str | None:
        """Why the log went offline (None while it is online)."""
        return self._offline

    @property
    def latest_epoch(self) -> int:
        return self._epochs.latest_epoch

    def epoch_entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return self._epochs.entries()

    # ---- appending -------------------------------------------------------------------------

    def append(self, batch: bytes | memoryview, *, leader_epoch: int, flush: bool = True) -> AppendInfo:
        """Validate one batch, give it the next offsets and ``leader_epoch``, and append it.

        ``flush`` applies the flush policy now (``always`` fsyncs before returning); pass False
        when a ``GroupCommit`` will flush for the caller. Nothing is written when it raises."""
        view = self._checked_view(batch)
        header = validate_batch(view, size_bytes_max=self.config.max_batch_bytes)
        with self._lock:
            self._check_open_locked()
            base = self._segments[-1].next_offset
            with self._write_errors_locked():
                if leader_epoch != self._epochs.latest_epoch or leader_epoch < 0:
                    self._epochs.assign(leader_epoch, base)
                self._active_for_locked(header, base).append(
                    patched_prefix(header, base, leader_epoch), view[PREFIX_SIZE:], header, base)
            if flush and self.config.flush != "never":
                self._apply_flush_policy_locked()
            last = base + header.last_offset_delta
            return AppendInfo(base, last, last + 1)

    def append_replica(self, batch: bytes | memoryview, *, flush: bool = True) -> AppendInfo:
        """Append a batch that already carries its offsets and epoch (a follower copying its
        leader); it must start exactly at the log end (or after it, in a compacted log: decision
        0321)."""
        view = self._checked_view(batch)
        header = validate_batch(view, size_bytes_max=self.config.max_batch_bytes)
        with self._lock:
            self._check_open_locked()
            if not self._follows_locked(header.base_offset, self.log_end_offset):
                raise NonSequentialAppendError(header.base_offset, self.log_end_offset)
            with self._write_errors_locked():
                self._epochs.assign(header.leader_epoch, header.base_offset)
                self._active_for_locked(header, header.base_offset).append(
                    bytes(view[:PREFIX_SIZE]), view[PREFIX_SIZE:], header, header.base_offset)
            if flush:
                self._apply_flush_policy_locked()
            return AppendInfo(header.base_offset, header.last_offset, header.next_offset)

    def append_replicas(self, batches: bytes | memoryview, *, flush: bool = True) -> AppendInfo | None:
        """Append whole batches copied from a leader, back to back in ``batches`` (each keeps its
        offsets and epoch; the first starts exactly at the log end), as ``append_replica`` would
        one after another, but with one write per run of batches that go to one segment at one
        epoch (``segments.log_replicas``). A batch that cannot be appended (torn, invalid, out of
        order, of an older epoch) raises as ``append_replica`` does; the batches before it stay
        appended. Returns where the appended batches went (None when ``batches`` is empty)."""
        view = memoryview(batches)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        if view.nbytes == 0:
            return None
        size_max = self.config.max_batch_bytes
        with self._lock:
            self._check_open_locked()
            first = self.log_end_offset
            with self._write_errors_locked():
                expected = append_runs_locked(view, first, size_max, self._follows_locked, self._epochs.assign,
                                              self._active_for_locked)
            if flush:
                self._apply_flush_policy_locked()
            return AppendInfo(first, expected - 1, expected) if expected > first else None

    def _follows_locked(self, base_offset: int, expected: int) -> bool:
        """A copied batch may start at ``expected``; in a compacted log also after it (the
        leader's compaction removed the records between)."""
        return base_offset == expected or (base_offset > expected and self.config.compacts)

    @contextlib.contextmanager
    def _write_errors_locked(self) -> Iterator[None]:
        """Turn an I/O failure of the write path into the typed error that says what became of
        the log: still whole and only short of space (``StorageFullError``), or offline."""
        try:
            yield
        except SegmentWriteError as exc:
            raise self._go_offline_locked(str(exc)) from exc
        except StorageError:
            raise  # typed before anything was written (an epoch, a batch that does not fit)
        except OSError as exc:
            if is_no_space(exc):
                raise StorageFullError(f"no space left for log {self.directory}: {exc}") from exc
            if is_fd_limit(exc):
                raise TooManyOpenFilesError(f"log {self.directory}: {exc}") from exc
            raise self._go_offline_locked(f"write failed: {exc}") from exc
        except Exception as exc:
            # A bug half-way through a write: the segment's state may not match its file.
            raise self._go_offline_locked(f"append failed: {exc!r}") from exc

    def _go_offline_locked(self, reason: str) -> LogOfflineError:
        if self._offline is None:
            self._offline = reason
        return LogOfflineError(self.directory, self._offline)

    def _checked_view(self, batch: bytes | memoryview) -> memoryview:
        view = memoryview(batch)
        if view.nbytes > self.config.max_batch_bytes:
            raise BatchTooLargeError(view.nbytes, self.config.max_batch_bytes)
        return view.cast("B") if view.format != "B" or view.ndim != 1 else view

    def _active_for_locked(self, header: BatchHeader, base_offset: int) -> LogSegment:
        active = self._segments[-1]
        if active.should_roll(header, base_offset):
            active = self._roll_locked()
        return active

    def roll(self) -> None:
        """Close the active segment to appends and start a new one at the log end."""
        with self._lock:
            self._check_open_locked()
            if self._segments[-1].size_bytes:
                self._roll_locked()

    def _roll_locked(self) -> LogSegment:
        """Start a new segment at the log end. On failure (a full disk) the old segment stays
        active and the new one's files are removed, so the log is as it was."""
        old = self._segments[-1]
        try:
            segment = self._segment(old.next_offset)
        except BaseException:
            remove_empty_segment(self.directory, old.next_offset)
            raise
        try:
            old.seal()
        except BaseException:
            segment.delete()
            raise
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        if old not in self._unflushed:
            self._unflushed.append(old)
        return segment

    # ---- flushing ----------------------------------------------------------------------------

    def _apply_flush_policy_locked(self) -> None:
        policy = self.config.flush
        if policy == "always" or (
            policy == "interval" and self._clock_ms() - self._last_flush_ms >= self.config.flush_ms
        ):
            self._flush_locked()

    def _flush_locked(self) -> None:
        try:
            for segment in [*self._unflushed, self._segments[-1]]:
                if segment.fd_open():
                    segment.flush()
            self._epochs.sync()
        except OSError as exc:
            raise self._go_offline_locked(f"fsync failed: {exc}") from exc
        self._unflushed.clear()
        self._recovery_point = self.log_end_offset
        self._last_flush_ms = self._clock_ms()

    def flush(self) -> int:
        """fsync everything appended so far; return the new recovery point.

        The fsyncs run on duplicated descriptors outside the lock, so appends continue meanwhile
        and the next flush covers them (group commit)."""
        with self._lock:
            self._check_open_locked()
            sealed = list(self._unflushed)
            fds = self._dup_fds_locked([*sealed, self._segments[-1]])
            end, truncations = self.log_end_offset, self._truncations
        try:
            for fd in fds:
                self._fsync(fd)
            self._epochs.sync()  # the epochs of what the point is to pass, before it passes them
        except OSError as exc:
            with self._lock:
                raise self._go_offline_locked(f"fsync failed: {exc}") from exc
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            # Only segments sealed before the fsyncs started are wholly covered; the active one
            # (even if it rolled meanwhile) may hold appends made after its fsync began.
            self._unflushed = [s for s in self._unflushed if s not in sealed]
            if self._truncations == truncations:
                self._recovery_point = max(self._recovery_point, end)
            else:
                self._recovery_point = min(self._recovery_point, self.log_end_offset)
            self._last_flush_ms = self._clock_ms()
            return self._recovery_point

    def _dup_fds_locked(self, segments: list[LogSegment]) -> list[int]:
        """Descriptors of their own for ``segments``' files (all or none: out of descriptors,
        the ones taken are closed and ``TooManyOpenFilesError`` says so)."""
        fds: list[int] = []
        try:
            for segment in segments:
                if segment.fd_open():
                    fds.append(segment.dup_fd())
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            if is_fd_limit(exc):
                raise TooManyOpenFilesError(f"log {self.directory}: {exc}") from exc
            raise
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def flush_due(self) -> bool:
        """True when the ``interval`` policy says a flush is due and there is something to flush."""
        with self._lock:
            return self.config.flush == "interval" and self._recovery_point < self.log_end_offset \
                and self._clock_ms() - self._last_flush_ms >= self.config.flush_ms

    def flush_if_due(self) -> bool:
        """Flush when the ``interval`` policy says it is time (for a periodic task)."""
        with self._lock:
            due = self.config.flush == "interval" and self._clock_ms() - self._last_flush_ms >= self.config.flush_ms
            dirty = self._recovery_point < self.log_end_offset
        if due and dirty:
            self.flush()
        return due and dirty

    # ---- reading (segments.log_reads) -------------------------------------------------------

    def read(self, offset: int, size_bytes_max: int, *, offset_max: int | None = None) -> LogRead:
        """Whole batches from the one holding ``offset``: at most ``size_bytes_max`` bytes unless
        the first batch alone is larger, and none that reaches ``offset_max`` (exclusive; the
        high watermark). Empty at the end. Offsets outside the log raise OffsetOutOfRangeError."""
        with self._lock:
            self._check_open_locked()
            limit = read_limit(self._segments, offset, size_bytes_max, offset_max)
            for segment, target in candidates(self._segments, self._bases, offset, limit):
                found = segment.read_batches(target, size_bytes_max, limit)
                if found is not None:
                    return LogRead(*found)
                if segment.next_offset > target:
                    break
            return LogRead(memoryview(b""), offset, offset)

    def slice(self, offset: int, size_bytes_max: int, *, offset_max: int | None = None) -> LogSlice | None:
        """Like ``read`` but returns a ``LogSlice`` for ``sendfile`` (None at the end)."""
        with self._lock:
            self._check_open_locked()
            limit = read_limit(self._segments, offset, size_bytes_max, offset_max)
            found = find_extent(self._segments, self._bases, offset, size_bytes_max, limit)
            if found is None:
                return None
            return LogSlice(self._dup_fds_locked([found[0]])[0], found[1])

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose batch has a timestamp >= ``timestamp`` (None: none yet)."""
        check_int("timestamp", timestamp)
        with self._lock:
            self._check_open_locked()
            for segment in self._segments:
                found = segment.offset_for_timestamp(timestamp)
                if found is not None:
                    return found
            return None

    # ---- configuration -------------------------------------------------------------------------

    def reconfigure(self, config: LogConfig) -> None:
        """Take ``config`` from now on: retention, flushing and the batch limit at once, the size
        and age limits of the active segment from its next append. The segment index size is
        kept (each index is sized when its segment opens), so ``segment_index_bytes`` takes
        effect only when the log is opened again."""
        with self._lock:
            config = dataclasses.replace(config, segment_index_bytes=self.config.segment_index_bytes)
            self.config = config
            if self._segments:
                self._segments[-1].config = config

    # ---- compaction: segments.log_compaction_side (``CompactionSide``) -------------------------

    # ---- retention and truncation --------------------------------------------------------------

    def apply_retention(self) -> int:
        """Delete whole closed segments past ``retention_ms``/``retention_bytes``; return how many."""
        with self._swap_lock, self._lock:
            self._check_open_locked()
            now = self._clock_ms()
            deleted = 0
            total = sum(s.size_bytes for s in self._segments)
            while len(self._segments) > 1:
                oldest = self._segments[0]
                expired = self.config.retention_ms >= 0 and oldest.max_timestamp < now - self.config.retention_ms
                too_big = self.config.retention_bytes >= 0 and total - oldest.size_bytes >= self.config.retention_bytes
                if not (expired or too_big):
                    break
                total -= oldest.size_bytes
                self._drop_first_locked()
                deleted += 1
            if deleted:
                self._epochs.truncate_from_start(self.log_start_offset)
            return deleted

    def delete_before(self, offset: int) -> int:
        """Delete the whole segments that end at or before ``offset`` (never the active one), so the
        log starts at the first segment kept. For logs whose records from ``offset`` on stand for
        everything before (a snapshot of an internal state log). Returns how many were deleted."""
        check_int("offset", offset)
        if offset < 0:
            raise InvalidArgumentError(f"offset must not be negative, not {offset}")
        with self._swap_lock, self._lock:
            self._check_open_locked()
            deleted = 0
            while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
                self._drop_first_locked()
                deleted += 1
            if deleted:
                self._epochs.truncate_from_start(self.log_start_offset)
            return deleted

    def _drop_first_locked(self) -> None:
        segment = self._segments.pop(0)
        self._bases.pop(0)
        if segment in self._unflushed:
            self._unflushed.remove(segment)
        segment.delete()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a follower cutting a divergent
        suffix). The new log end may be below ``offset`` when it falls inside a batch. Returns
        the new log end offset. A cut above every segment a compaction swap under way replaces
        (the usual case: a follower cuts only above its high watermark, a pass compacts only
        below it) does not wait for the swap; one that may reach them does."""
        check_int("offset", offset)
        with self._lock:
            if self._swap_end is None or offset > self._swap_end:
                return self._truncate_to_locked(offset)
        with self._swap_lock, self._lock:
            return self._truncate_to_locked(offset)

    def _truncate_to_locked(self, offset: int) -> int:
        self._check_open_locked()
        if offset >= self.log_end_offset:
            return self.log_end_offset
        if offset <= self.log_start_offset:
            self._reset_locked(offset if offset >= 0 else 0)
            return self.log_end_offset
        while self._segments[-1].base_offset >= offset:
            segment = self._segments.pop()
            self._bases.pop()
            segment.delete()
        self._reopen_active_locked()
        self._segments[-1].truncate_to(offset)
        self._after_truncation_locked()
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``offset``."""
        check_int("offset", offset)
        if offset < 0:
            raise InvalidArgumentError(f"offset must not be negative, not {offset}")
        with self._swap_lock, self._lock:
            self._check_open_locked()
            self._reset_locked(offset)

    def _reset_locked(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments.clear()
        self._bases.clear()
        self._add_segment(self._segment(offset))
        self._epochs.reset()
        self._after_truncation_locked()

    def _reopen_active_locked(self) -> None:
        """Make the last segment writable again (its indexes were trimmed when it was sealed)."""
        last = self._segments[-1]
        if not last.sealed:
            return
        last.close(trim=False)
        segment = self._segment(last.base_offset)
        if not segment.load():
            segment.recover()
        self._segments[-1] = segment
        self._unflushed = [s for s in self._unflushed if s is not last]

    def _after_truncation_locked(self) -> None:
        self._truncations += 1
        # What is appended from here on is not compacted, whatever offsets it reuses.
        self._cleaned_offset = min(self._cleaned_offset, self.log_end_offset)
        self._unflushed = [s for s in self._unflushed if s.fd_open()]
        self._epochs.truncate_from_end(self.log_end_offset)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)

    # ---- closing -------------------------------------------------------------------------------

    def _check_open_locked(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        if self._offline is not None:
            raise LogOfflineError(self.directory, self._offline)

    def close(self) -> None:
        """Flush, trim indexes, close files and mark the shutdown clean. Idempotent."""
        with self._swap_lock, self._lock:
            if self._closed:
                return
            if self._offline is not None:
                # No flush and no clean-shutdown mark: the next start recovers past the recovery point.
                for segment in self._segments:
                    segment.close(trim=False)
                self._closed = True
                return
            try:
                self._flush_locked()
                for segment in self._segments:
                    segment.close(trim=True)
                write_atomic(os.path.join(self.directory, CLEAN_SHUTDOWN_FILE), b"", self._fsync)
            except (OSError, StorageError):
                for segment in self._segments:
                    segment.close(trim=False)
                raise
            finally:
                self._closed = True

    def delete(self, *, rename_to: str | None = None) -> None:
        """Close without a clean-shutdown mark and remove every file (topic deletion), online or
        offline; it writes nothing, so it works on a full disk. With ``rename_to`` the directory
        is first renamed there and left behind empty (a mark that the deletion is under way);
        without, it is removed."""
        with self._swap_lock, self._lock:
            for segment in self._segments:
                segment.close(trim=False)
            self._closed = True
            directory = self.directory
            if rename_to is not None:
                os.rename(directory, rename_to)  # on failure the log is closed, its files intact
                directory = rename_to
            remove_compaction_dirs(directory)
            for name in os.listdir(directory):
                os.unlink(os.path.join(directory, name))
            if rename_to is None:
                os.rmdir(directory)

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
