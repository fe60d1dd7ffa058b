"""The partition log's methods for a compaction pass (``segments.cleaner``): how dirty it is, the
segments a pass may take, and the swap of their compacted copies. ``PartitionLog`` is a
``CompactionSide``: these methods work on its state, under its locks, as its own do (the log's
invariants are in ``segments.log``); their file steps are ``segments.log_cleaning``'s.

The swap holds the log's swap lock throughout and the log's lock only for its check and for the
renames and reopening: no fsync under the lock that appends wait for on the event loop (decision
0412).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from segments.cleaner_files import CleanableSegment, remove_swap_dir
from segments.errors import LogOfflineError
from segments.log_cleaning import (
    SwapCommittedError,
    cleanable_locked,
    commit_swap,
    move_files_locked,
    reopen_swapped,
    unchanged,
)
from segments.log_epochs import EpochHistory
from segments.segment import LogSegment

logger = logging.getLogger(__name__)


class CompactionSide:
    """Mixed into ``PartitionLog``, which sets every attribute: the slots of the state a swap changes
    are declared here, the rest of what these methods read is named below."""

    __slots__ = ("_bases", "_cleaned_offset", "_segments", "_swap_end", "_unflushed")

    _swap_end: int | None
    _segments: list[LogSegment]
    _bases: list[int]
    _unflushed: list[LogSegment]
    _cleaned_offset: int
    directory: str
    _lock: threading.Lock
    _swap_lock: threading.Lock
    _recovery_point: int
    _closed: bool
    _offline: str | None
    _epochs: EpochHistory
    _fsync: Callable[[int], None]

    if TYPE_CHECKING:
        @property
        def log_start_offset(self) -> int: ...

        def _segment(self, base_offset: int) -> LogSegment: ...

        def _go_offline_locked(self, reason: str) -> LogOfflineError: ...

        def _dup_fds_locked(self, segments: list[LogSegment]) -> list[int]: ...

    def dirty_ratio(self) -> float:
        """Bytes of closed segments not compacted yet over bytes of all closed segments (0: none)."""
        with self._lock:
            closed = self._segments[:-1]
            total = sum(s.size_bytes for s in closed)
            dirty = sum(s.size_bytes for s in closed if s.next_offset > self._cleaned_offset)
            return dirty / total if total else 0.0

    def oldest_dirty_timestamp(self) -> int | None:
        """The first timestamp of the oldest closed segment not compacted yet (None: none)."""
        with self._lock:
            for segment in self._segments[:-1]:
                if segment.next_offset > self._cleaned_offset:
                    return segment.rolling_timestamp
            return None

    @property
    def cleaned_offset(self) -> int:
        """Every closed segment below this offset has been compacted (in this process)."""
        return self._cleaned_offset

    def cleanable_segments(self, newest_timestamp: int, end_offset: int | None = None) -> list[CleanableSegment]:
        """The oldest closed segments, durable, all of whose records have timestamps at or below
        ``newest_timestamp`` (the compaction lag) and offsets below ``end_offset`` (a replica's
        high watermark: a record a leader change may still truncate must not supersede one that
        is committed), each with a descriptor of its own (the caller closes it) to read outside
        the lock. Empty when the log is closed or offline."""
        with self._lock:
            if self._closed or self._offline is not None:
                return []
            return cleanable_locked(self._segments[:-1], self._recovery_point, newest_timestamp, end_offset,
                                    self._dup_fds_locked)

    def swap_cleaned(self, cleaned: list[CleanableSegment], cleaning_dir: str, next_offset: int) -> bool:
        """Swap the compacted copies of ``cleaned`` (written and fsynced in ``cleaning_dir``) in for
        them, unless the log changed meanwhile (closed, offline, or one of them deleted or
        truncated): then nothing changes and False is returned. ``next_offset``: every closed
        segment below it is compacted now.

        Appends wait for the log's lock on the event loop, so no fsync happens under it: the swap
        holds the swap lock throughout (every operation that drops or cuts segments takes it
        first, so the segments replaced stay as they were read), and the log's lock only for the
        renames and the new segments' index check. Retention, and a truncation that may reach the
        segments replaced, wait for a swap under way; appends, reads and the usual truncation
        (above them) do not."""
        with self._swap_lock:
            with self._lock:
                if self._closed or self._offline is not None or not unchanged(self._segments[:-1], cleaned):
                    return False
                self._swap_end = max(item.next_offset for item in cleaned)
            try:
                return self._swap_committing(cleaned, cleaning_dir, next_offset)
            finally:
                with self._lock:
                    self._swap_end = None

    def _swap_committing(self, cleaned: list[CleanableSegment], cleaning_dir: str, next_offset: int) -> bool:
        """``swap_cleaned`` from the commit on, with the swap lock held. Once committed, any failure
        takes the log offline: the next start finishes the swap, and until then nothing may cut
        or drop the segments the committed directory would replace."""
        try:
            swap = commit_swap(self.directory, self._fsync, cleaning_dir)
        except SwapCommittedError as exc:
            with self._lock:
                raise self._go_offline_locked(f"compaction swap failed: {exc}") from exc
        try:
            with self._lock:
                if self._offline is not None:  # an append's write failed meanwhile
                    logger.warning("compaction swap committed on an offline log: the next start finishes it",
                                   extra={"fields": {"directory": self.directory}})
                    return False
                start = self.log_start_offset
                move_files_locked(self.directory, swap, cleaned, self._go_offline_locked)
                replaced = {item.segment for item in cleaned}
                self._segments = reopen_swapped(self._segments, replaced, self._segment)
                self._bases = [s.base_offset for s in self._segments]
                self._unflushed = [s for s in self._unflushed if s not in replaced]
                self._cleaned_offset = max(self._cleaned_offset, next_offset)
                if self.log_start_offset != start:
                    self._epochs.truncate_from_start(self.log_start_offset)
            remove_swap_dir(self.directory, swap, self._fsync)
        except LogOfflineError:
            raise
        except Exception as exc:  # a reopen out of descriptors, the removal's fsync, a full disk
            with self._lock:
                raise self._go_offline_locked(f"compaction swap failed: {exc!r}") from exc
        return True

    def mark_cleaned(self, cleaned: list[CleanableSegment], next_offset: int) -> None:
        """Every closed segment below ``next_offset`` is compacted (a pass that changed nothing),
        unless one of ``cleaned`` is gone meanwhile (a truncation)."""
        with self._lock:
            if all(item.segment in self._segments for item in cleaned):
                self._cleaned_offset = max(self._cleaned_offset, next_offset)
