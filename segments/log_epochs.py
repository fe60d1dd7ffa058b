"""A partition log's leader epoch history with its checkpoint file (``leader-epoch-checkpoint``).

The history covers every batch: an epoch is recorded, and the checkpoint rewritten (atomically,
fsynced), before its first batch is appended; when that write fails the epoch is not recorded
and nothing is appended. Whenever the log loses offsets at either end (retention, truncation,
compaction, recovery) the history is cut to what is left and the checkpoint rewritten. A
checkpoint that cannot be read on open resets the history (said in the recovery report).

Pure over its file, no lock of its own: the log calls it with its lock held.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import final

from segments.batch import U32_MAX
from segments.checkpoint import LEADER_EPOCH_FILE, read_epochs, write_epochs
from segments.epochs import LeaderEpochCache
from segments.errors import CorruptCheckpointError, InvalidArgumentError, StaleLeaderEpochError, check_int


@final
class EpochHistory:
    """``latest_epoch`` is a plain attribute, kept equal to the history's, for the append path."""

    __slots__ = ("_cache", "_fsync", "_path", "latest_epoch")

    def __init__(self, directory: str, fsync: Callable[[int], None]) -> None:
        self._path = os.path.join(directory, LEADER_EPOCH_FILE)
        self._fsync = fsync
        self._cache = LeaderEpochCache()
        self.latest_epoch = self._cache.latest_epoch

    @classmethod
    def load(cls, directory: str, fsync: Callable[[int], None], errors: list[str], start_offset: int,
             end_offset: int) -> EpochHistory:
        """The checkpoint in ``directory`` cut to the log's offsets (rewritten when cut); empty
        when it cannot be read (said in ``errors``)."""
        history = cls(directory, fsync)
        try:
            history._cache = LeaderEpochCache(read_epochs(history._path))
        except (CorruptCheckpointError, StaleLeaderEpochError) as exc:
            errors.append(f"leader epoch checkpoint unreadable, history reset: {exc}")
        changed = history._cache.truncate_from_end(end_offset)
        changed |= history._cache.truncate_from_start(start_offset)
        history.latest_epoch = history._cache.latest_epoch
        if changed:
            history.write()
        return history

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
        write_epochs(self._path, self.entries(), self._fsync)
