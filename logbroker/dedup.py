"""De-duplication of retried produces (DESIGN §4): which idempotent batches a partition stored
lately, so that a retry appends nothing and answers the first answer.

A batch is idempotent when its header carries a producer id (not ``NO_PRODUCER_ID``): an id the
broker issued to a ``Producer`` (its epoch, and a per-partition sequence), or the identity the
broker builds for a write with an ``Idempotency-Key`` (``logbroker.producer_ids``). Two batches
with the same ``(producer id, epoch, base sequence)`` within the window are the same write. Every
id carries its writer's tag, so two users never share an identity.

The ids travel in the stored batches, so every replica holds them: a leader builds its window
from the tail of its log when it first needs it (after a start or a leader change,
``DedupWindow.from_headers``) and keeps it current as it appends.

Invariants: an entry names the offsets the first write got; entries older than ``window_ms`` are
forgotten (a retry after that is a new write); at most ``entries_max`` entries per partition.
A sequenced producer (``producer_ids.is_sequenced``: Kafka's idempotent producers) is also held to
sequences without gaps: a batch that is not a retry must start where its producer's last batch in
the partition ended (modulo 2^31, as Kafka wraps), else ``OutOfOrderSequenceError``; a producer
the window does not know (new, or idle longer than ``window_ms``) may start anywhere, as Kafka lets
an unknown producer.
When full, the writer holding the most entries loses its oldest one: one writer's flood of keys
evicts its own entries, never those of a writer holding fewer. Pure logic: no I/O, the clock
comes in as an argument.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Final, NamedTuple

from logbroker.errors import OutOfOrderSequenceError
from logbroker.producer_ids import Identity, is_sequenced, writer_of
from segments.batch import NO_PRODUCER_ID, BatchHeader

ENTRIES_MAX: Final = 100_000
SEQUENCE_WRAP: Final = 2**31  # base_sequence is an int32; Kafka's producers wrap to 0
WINDOW_MS_DEFAULT: Final = 120_000
WINDOW_KEY: Final = "dedup_window_ms"


class Appended(NamedTuple):
    """Where the first write of an idempotent batch went."""

    base_offset: int
    last_offset: int
    appended_ms: int

    @property
    def records(self) -> int:
        return self.last_offset - self.base_offset + 1


def identity(header: BatchHeader) -> Identity | None:
    """The de-duplication identity of a batch, None when it is not idempotent."""
    if header.producer_id == NO_PRODUCER_ID or header.producer_id < 0:
        return None
    return Identity(header.producer_id, header.producer_epoch, header.base_sequence)


class DedupWindow:
    def __init__(self, window_ms: int, entries_max: int = ENTRIES_MAX) -> None:
        self.window_ms = window_ms
        self._entries_max = entries_max
        self._entries: collections.OrderedDict[Identity, Appended] = collections.OrderedDict()  # oldest first
        self._by_writer: dict[int, collections.OrderedDict[Identity, None]] = {}  # the same, per writer tag
        # Per sequenced producer id: its epoch, the sequence its next batch starts at, when its last was appended
        # (least recently appended first; at most entries_max, as each has an entry).
        self._next: collections.OrderedDict[int, tuple[int, int, int]] = collections.OrderedDict()

    @classmethod
    def from_headers(cls, headers: Iterable[BatchHeader], window_ms: int, now_ms: int,
                     entries_max: int = ENTRIES_MAX) -> DedupWindow:
        """A window rebuilt from stored batches (oldest first); their append time is taken as
        their max timestamp, the best the log knows."""
        window = cls(window_ms, entries_max)
        for header in headers:
            found = identity(header)
            if found is not None:
                window.record(found, header.base_offset, header.last_offset, min(header.max_timestamp, now_ms))
        window.expire(now_ms)
        return window

    def __len__(self) -> int:
        return len(self._entries)

    def held_by(self, producer_id: int) -> int:
        """How many entries the writer of ``producer_id`` holds."""
        return len(self._by_writer.get(writer_of(producer_id), ()))

    def find(self, key: Identity, now_ms: int) -> Appended | None:
        self.expire(now_ms)
        return self._entries.get(key)

    def check_sequence(self, key: Identity, now_ms: int) -> None:
        """Raise ``OutOfOrderSequenceError`` when ``key`` (not a retry: ``find`` did not know it) is
        a sequenced producer's batch that does not start where its last one ended."""
        if not is_sequenced(key):
            return
        known = self._next.get(key.producer_id)
        if known is None or known[2] < now_ms - self.window_ms or known[0] != key.producer_epoch:
            return
        if key.base_sequence != known[1]:
            raise OutOfOrderSequenceError(
                f"producer {key.producer_id}'s batch starts at sequence {key.base_sequence}; its last batch in this "
                f"partition ended before {known[1]}: a batch between them is missing (nothing was stored)")

    def record(self, key: Identity, base_offset: int, last_offset: int, now_ms: int) -> None:
        self._drop(key)
        self._entries[key] = Appended(base_offset, last_offset, now_ms)
        if is_sequenced(key):
            following = (key.base_sequence + last_offset - base_offset + 1) % SEQUENCE_WRAP
            self._next[key.producer_id] = (key.producer_epoch, following, now_ms)
            self._next.move_to_end(key.producer_id)
            if len(self._next) > self._entries_max:
                self._next.popitem(last=False)
        self._by_writer.setdefault(writer_of(key[0]), collections.OrderedDict())[key] = None
        if len(self._entries) > self._entries_max:
            largest = max(self._by_writer.values(), key=len)
            self._drop(next(iter(largest)))

    def expire(self, now_ms: int) -> None:
        horizon = now_ms - self.window_ms
        while self._entries:
            key, oldest = next(iter(self._entries.items()))
            if oldest.appended_ms >= horizon:
                break
            self._drop(key)
        while self._next:
            producer_id, (_, _, appended_ms) = next(iter(self._next.items()))
            if appended_ms >= horizon:
                break
            del self._next[producer_id]

    def _drop(self, key: Identity) -> None:
        if self._entries.pop(key, None) is None:
            return
        writer = writer_of(key[0])
        held = self._by_writer[writer]
        del held[key]
        if not held:
            del self._by_writer[writer]
