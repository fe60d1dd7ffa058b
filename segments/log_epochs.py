"""A partition log's leader epoch history with its checkpoint file (``leader-epoch-checkpoint``).

The history covers every batch: an epoch is recorded before its first batch is appended. Whenever
the log loses offsets at either end (retention, truncation, compaction, recovery) the history is
cut to what is left. A checkpoint that cannot be read on open resets the history (said in the
recovery report).

Durability without fsync on the append path (decision 0401). A change writes the history to
``leader-epoch-checkpoint.pending`` (temp file and rename, no fsync): an epoch change under a slow
disk must not hold the event loop for two fsyncs at every leader change. ``sync`` (the log's
flush, before the recovery point may pass the batches the change is about) writes the history as
last written to the checkpoint with fsync (file and directory), then drops the pending file if no
change came meanwhile. So the checkpoint always holds every epoch below the recovery point; on
open a readable pending file is newer and taken, and the epochs of the batches past the recovery
point are taken from their headers (``adopt``), which every batch carries.

No lock of the log's own: the log calls it with its lock held; ``sync`` runs in the flush thread
without the log's lock. The file lock guards only the pending file and what was last written:
``sync`` does not hold it across its fsyncs, so an epoch change on the event loop (a new
leadership's first append, under the log's lock) never waits for a slow disk's fsync. One sync
runs at a time (``_sync_lock``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from typing import Final, final

from segments.batch import U32_MAX
from segments.checkpoint import LEADER_EPOCH_FILE, read_epochs, write_epochs
from segments.epochs import LeaderEpochCache
from segments.errors import CorruptCheckpointError, InvalidArgumentError, StaleLeaderEpochError, check_int

PENDING_SUFFIX: Final = ".pending"


def _no_fsync(_fd: int) -> None:
    """Written, not yet made durable: ``EpochHistory.sync`` does that off the append path."""


@final
class EpochHistory:
    """``latest_epoch`` is a plain attribute, kept equal to the history's, for the append path."""

    __slots__ = ("_cache", "_dirty", "_file_lock", "_fsync", "_path", "_pending", "_sync_lock", "_written",
                 "_written_count", "latest_epoch")

    def __init__(self, directory: str, fsync: Callable[[int], None]) -> None:
        self._path = os.path.join(directory, LEADER_EPOCH_FILE)
        self._pending = self._path + PENDING_SUFFIX
        self._fsync = fsync
        self._cache = LeaderEpochCache()
        self.latest_epoch = self._cache.latest_epoch
        self._file_lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._dirty = False  # the pending file holds a change the checkpoint does not
        self._written: list[tuple[int, int]] = []  # the history as the pending file holds it
        self._written_count = 0  # writes so far: a sync knows whether one came while it ran

    @classmethod
    def load(cls, directory: str, fsync: Callable[[int], None], errors: list[str], start_offset: int,
             end_offset: int) -> EpochHistory:
        """The checkpoint in ``directory`` (or the pending file, newer, when it is readable) cut to
        the log's offsets; empty when neither can be read (said in ``errors``). Leaves the file
        durable: the caller opens the log off the event loop."""
        history = cls(directory, fsync)
        try:
            history._cache = LeaderEpochCache(read_epochs(history._path))
        except (CorruptCheckpointError, StaleLeaderEpochError) as exc:
            errors.append(f"leader epoch checkpoint unreadable, history reset: {exc}")
        changed = False
        if os.path.exists(history._pending):
            try:
                history._cache = LeaderEpochCache(read_epochs(history._pending))
                changed = True
            except (CorruptCheckpointError, StaleLeaderEpochError):  # torn by the crash: the checkpoint stands
                os.unlink(history._pending)
        changed |= history._cache.truncate_from_end(end_offset)
        changed |= history._cache.truncate_from_start(start_offset)
        history.latest_epoch = history._cache.latest_epoch
        if changed:
            history.write()
            history.sync()
        return history

    def adopt(self, starts: Iterable[tuple[int, int]]) -> bool:
        """Take the epochs the log's batches carry from a contiguous tail to the log end:
        ``(epoch, offset)`` where each run of one epoch starts, in offset order (what a recovery
        scanned past the recovery point). The history from the first of them on is replaced by
        them. True when it changed (the caller writes and syncs it)."""
        runs = list(starts)
        if not runs:
            return False
        before = self._cache.entries
        self._cache.truncate_from_end(runs[0][1])
        for epoch, offset in runs:
            if epoch < self._cache.latest_epoch:  # an entry before the tail names a newer epoch than its batches
                self._cache.truncate_from_end(min(e.start_offset for e in self._cache.entries if e.epoch >= epoch))
            self._cache.assign(epoch, offset)
        self.latest_epoch = self._cache.latest_epoch
        return self._cache.entries != before

    def entries(self) -> list[tuple[int, int]]:
        return [tuple(e) for e in self._cache.entries]  # type: ignore[misc]

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (written before it counts); an older
        epoch than the latest raises ``StaleLeaderEpochError``, the latest changes nothing."""
        check_int("leader_epoch", epoch)
        if not 0 <= epoch <= U32_MAX:
            raise InvalidArgumentError(f"leader_epoch must be in [0, {U32_MAX}], not {epoch}")
        if epoch < self.latest_epoch:
            raise StaleLeaderEpochError(epoch, self.latest_epoch)
        if epoch > self.latest_epoch:
            before = self._cache.entries
            self._cache.assign(epoch, start_offset)
            try:
                self.write()
            except BaseException:
                self._cache = LeaderEpochCache([tuple(e) for e in before])  # type: ignore[misc]
                raise
            self.latest_epoch = self._cache.latest_epoch

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget the history before ``start_offset`` (the log starts there now)."""
        if self._cache.truncate_from_start(start_offset):
            self.latest_epoch = self._cache.latest_epoch
            self.write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the epochs that start at or after ``end_offset`` (the log ends there now)."""
        if self._cache.truncate_from_end(end_offset):
            self.latest_epoch = self._cache.latest_epoch
            self.write()

    def reset(self) -> None:
        """Forget the whole history (the log restarts empty)."""
        self._cache = LeaderEpochCache()
        self.latest_epoch = self._cache.latest_epoch
        self.write()

    def write(self) -> None:
        """The history to the pending file, not yet durable (``sync``)."""
        entries = self.entries()
        with self._file_lock:
            write_epochs(self._pending, entries, _no_fsync)
            self._written = entries
            self._written_count += 1
            self._dirty = True

    def sync(self) -> None:
        """Make the last change durable: write the history as last written to the checkpoint
        (temp file, fsync, rename, directory fsync), outside the file lock; then drop the pending
        file unless a change was written meanwhile. Blocking; raises ``OSError`` as fsync does."""
        with self._sync_lock:
            with self._file_lock:
                if not self._dirty:
                    return
                entries, count = self._written, self._written_count
            write_epochs(self._path, entries, self._fsync)
            with self._file_lock:
                if self._written_count == count:
                    self._dirty = False
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self._pending)  # it holds what the checkpoint holds now
