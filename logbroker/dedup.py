"""De-duplication of retried produces (DESIGN §4): which idempotent batches a partition stored
lately, so that a retry appends nothing and answers the first answer.

A batch is idempotent when its header carries a producer id (not ``NO_PRODUCER_ID``): the Python
``Producer`` sets its own id, epoch and per-partition sequence; a produce with an
``Idempotency-Key`` header is built with ``producer_id = key_producer_id(key)``,
``producer_epoch = KEY_EPOCH``, ``base_sequence = 0``. Two batches with the same ``(producer id,
epoch, base sequence)`` within the window are the same write.

The ids travel in the stored batches, so every replica holds them: a leader builds its window
from the tail of its log when it first needs it (after a start or a leader change,
``DedupWindow.from_headers``) and keeps it current as it appends.

Invariants: an entry names the offsets the first write got; entries older than ``window_ms`` are
forgotten (a retry after that is a new write); at most ``ENTRIES_MAX`` entries per partition, the
oldest dropped first. Pure logic: no I/O, the clock comes in as an argument.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Iterable
from typing import Final, NamedTuple

from logbroker.errors import InvalidRequestError
from segments.batch import NO_PRODUCER_ID, BatchHeader

KEY_EPOCH: Final = 32_767  # the producer epoch of a batch built for an Idempotency-Key
ENTRIES_MAX: Final = 100_000
WINDOW_MS_DEFAULT: Final = 120_000
KEY_CHARS_MAX: Final = 200
WINDOW_KEY: Final = "dedup_window_ms"

Identity = tuple[int, int, int]  # producer id, producer epoch, base sequence


class Appended(NamedTuple):
    """Where the first write of an idempotent batch went."""

    base_offset: int
    last_offset: int
    appended_ms: int

    @property
    def records(self) -> int:
        return self.last_offset - self.base_offset + 1


def key_producer_id(key: str) -> int:
    """The producer id of the batches built for an ``Idempotency-Key`` (63 bits of its hash)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") & (2**63 - 1)


def check_idempotency_key(key: str) -> str:
    """An ``Idempotency-Key`` is 1 to ``KEY_CHARS_MAX`` printable ASCII characters."""
    if not 0 < len(key) <= KEY_CHARS_MAX or not all(" " < c <= "~" for c in key):
        raise InvalidRequestError(f"Idempotency-Key must be 1 to {KEY_CHARS_MAX} printable ASCII characters "
                                  "without spaces")
    return key


def identity(header: BatchHeader) -> Identity | None:
    """The de-duplication identity of a batch, None when it is not idempotent."""
    if header.producer_id == NO_PRODUCER_ID or header.producer_id < 0:
        return None
    return header.producer_id, header.producer_epoch, header.base_sequence


class DedupWindow:
    def __init__(self, window_ms: int, entries_max: int = ENTRIES_MAX) -> None:
        self.window_ms = window_ms
        self._entries_max = entries_max
        self._entries: collections.OrderedDict[Identity, Appended] = collections.OrderedDict()

    @classmethod
    def from_headers(cls, headers: Iterable[BatchHeader], window_ms: int, now_ms: int) -> DedupWindow:
        """A window rebuilt from stored batches (oldest first); their append time is taken as
        their max timestamp, the best the log knows."""
        window = cls(window_ms)
        for header in headers:
            found = identity(header)
            if found is not None:
                window.record(found, header.base_offset, header.last_offset, min(header.max_timestamp, now_ms))
        window.expire(now_ms)
        return window

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, key: Identity, now_ms: int) -> Appended | None:
        self.expire(now_ms)
        return self._entries.get(key)

    def record(self, key: Identity, base_offset: int, last_offset: int, now_ms: int) -> None:
        self._entries.pop(key, None)
        self._entries[key] = Appended(base_offset, last_offset, now_ms)
        while len(self._entries) > self._entries_max:
            self._entries.popitem(last=False)

    def expire(self, now_ms: int) -> None:
        horizon = now_ms - self.window_ms
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.appended_ms >= horizon:
                break
            self._entries.popitem(last=False)

    def forget_from(self, offset: int) -> None:
        """The log was cut at ``offset``: writes stored there are gone."""
        for key in [k for k, a in self._entries.items() if a.last_offset >= offset]:
            del self._entries[key]
