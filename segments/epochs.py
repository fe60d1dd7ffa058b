"""Leader epoch history of a partition: which epoch started writing at which offset.

Pure logic. Invariant: epochs strictly increase and their start offsets never decrease, so the
end offset of an epoch is the start offset of the next one (or the log end for the latest). A
follower compares its history with its leader's (``partition_state.truncation_point``, on an
``align`` entry) and cuts its log where they first differ, so that no two replicas keep
divergent suffixes.
"""

from __future__ import annotations

from typing import NamedTuple, final

from segments.errors import StaleLeaderEpochError


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


UNKNOWN_EPOCH = -1


@final
class LeaderEpochCache:
    __slots__ = ("_entries",)

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self._entries: list[EpochEntry] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNKNOWN_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True when the history changed.

        An older epoch raises ``StaleLeaderEpochError``; the same epoch changes nothing."""
        if self._entries:
            last = self._entries[-1]
            if epoch < last.epoch:
                raise StaleLeaderEpochError(epoch, last.epoch)
            if epoch == last.epoch:
                return False
            if start_offset < last.start_offset:
                # A newer epoch cannot start before an older one: the older one never wrote there.
                self._entries = [e for e in self._entries if e.start_offset < start_offset]
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        changed = len(kept) != len(self._entries)
        self._entries = kept
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """Forget history before ``start_offset`` (retention), keeping the epoch in force there."""
        older = [e for e in self._entries if e.start_offset <= start_offset]
        if not older or (len(older) == 1 and older[0].start_offset == start_offset):
            return False
        keep = older[-1]
        self._entries = [EpochEntry(keep.epoch, start_offset)] + [
            e for e in self._entries if e.start_offset > start_offset
        ]
        return True
