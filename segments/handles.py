"""A node-wide bound on the descriptors that sealed segments hold open.

A sealed segment holds three descriptors: its log file, and one inside each index's read-only
mapping (the mapping keeps a duplicate of the descriptor it was made from). Many partitions with
many segments each would exhaust the process's limit, so sealed segments register here when they
open their files, and when more than ``segments_max`` are open the least recently used are
released; a released segment reopens its files on its next use. Active segments are never
released (there is one per partition), nor segments whose fsync is still due.

Concurrency: one lock orders the LRU and is never held while a segment is released. A segment is
released under its own log's lock, taken without blocking (a log busy in another thread is
skipped, so two logs that evict each other's segments cannot deadlock); when the log asking is the
segment's owner it already holds that lock. The bound is therefore soft: a round may leave a few
more segments open than allowed when their logs are busy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Final, Generic, Protocol, TypeVar, final

# What the budget counts: a segment, known here only as a key (``segments.segment`` uses this
# module, so this one names no segment class).
S = TypeVar("S", bound=Hashable)
S_contra = TypeVar("S_contra", bound=Hashable, contravariant=True)

SEGMENTS_MAX_DEFAULT: Final = 10_000
EXTRA_CANDIDATES: Final = 8  # looked at past the excess, in case some owners are busy


class SegmentOwner(Protocol[S_contra]):
    def try_release(self, segment: S_contra, *, held: bool) -> bool:
        """Release ``segment``'s files if the owner allows it now; True when released."""
        ...


@final
class SegmentHandles(Generic[S]):
    __slots__ = ("_lock", "_open", "releases", "segments_max")

    def __init__(self, segments_max: int = SEGMENTS_MAX_DEFAULT) -> None:
        if segments_max < 1:
            raise ValueError(f"segments_max must be positive, not {segments_max}")
        self.segments_max = segments_max
        self._lock = threading.Lock()
        self._open: OrderedDict[S, SegmentOwner[S]] = OrderedDict()
        self.releases = 0

    @property
    def open_count(self) -> int:
        return len(self._open)

    def opened(self, segment: S, owner: SegmentOwner[S]) -> None:
        """``segment`` (sealed) holds its files now; release others beyond the bound. The caller
        holds ``owner``'s lock."""
        with self._lock:
            self._open[segment] = owner
            self._open.move_to_end(segment)
            excess = len(self._open) - self.segments_max
            if excess <= 0:
                return
            candidates = [(s, o) for s, o in self._open.items() if s is not segment][: excess + EXTRA_CANDIDATES]
        for victim, victim_owner in candidates:
            if excess <= 0:
                break
            if victim_owner.try_release(victim, held=victim_owner is owner):
                self.releases += 1
                excess -= 1

    def touched(self, segment: S) -> None:
        """``segment`` was read: it is the most recently used."""
        with self._lock:
            if segment in self._open:
                self._open.move_to_end(segment)

    def forget(self, segment: S) -> None:
        """``segment`` closed or released its files."""
        with self._lock:
            self._open.pop(segment, None)


@final
class LogHandles(Generic[S]):
    """What one log's segments tell the budget: the budget and the log that owns them."""

    __slots__ = ("budget", "owner")

    def __init__(self, budget: SegmentHandles[S], owner: SegmentOwner[S]) -> None:
        self.budget = budget
        self.owner = owner

    def opened(self, segment: S) -> None:
        self.budget.opened(segment, self.owner)

    def touched(self, segment: S) -> None:
        self.budget.touched(segment)

    def forget(self, segment: S) -> None:
        self.budget.forget(segment)
