"""This node's usage counts by (hour, user, topic) (pure: time passed in).

Counts only grow within an hour; each hour's counts are this node's totals for it, so writing an
hour again replaces what was written before (a write is idempotent, a lost one is caught up by the
next). Bounds: at most ``TOPICS_PER_USER_HOUR_MAX`` topics of one user and ``KEYS_PER_HOUR_MAX``
(user, topic) pairs in all an hour; past either a new pair is counted under the user's ``OTHER``
topic (for at most ``OVERFLOW_USERS_MAX`` users), and past that
under ``OTHER`` for both, so memory and a written record stay bounded whatever the traffic; at
most ``HOURS_KEPT`` hours are kept (the oldest, long written, are dropped first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Final

HOUR_MS: Final = 3_600_000
DAY_MS: Final = 24 * HOUR_MS
KEYS_PER_HOUR_MAX: Final = 3_000  # with names at their longest, an hour's record stays under etcd's 1.5 MiB
TOPICS_PER_USER_HOUR_MAX: Final = 200  # one user's pairs an hour: a flood of names fills only their own share
OVERFLOW_USERS_MAX: Final = 500
HOURS_KEPT: Final = 3
OTHER: Final = "*"
FIELDS: Final = ("bytes_in", "records_in", "bytes_out", "records_out", "requests", "stream_ms", "storage_bytes")


def hour_of(now_ms: int) -> int:
    return now_ms - now_ms % HOUR_MS


@dataclasses.dataclass(slots=True)
class Counts:
    """What one user did to one topic in one hour on one node. ``storage_bytes`` is a level (the
    last sample of the bytes this node holds of the topic for its owner), the rest are sums."""

    bytes_in: int = 0
    records_in: int = 0
    bytes_out: int = 0
    records_out: int = 0
    requests: int = 0
    stream_ms: int = 0
    storage_bytes: int = 0

    def row(self) -> list[int]:
        return [self.bytes_in, self.records_in, self.bytes_out, self.records_out, self.requests, self.stream_ms,
                self.storage_bytes]


class UsageLedger:
    def __init__(self) -> None:
        self._hours: dict[int, dict[tuple[str, str], Counts]] = {}
        self._topics_of: dict[int, dict[str, int]] = {}  # hour -> user -> their pairs that hour
        self._changed: set[int] = set()
        self.totals: dict[str, Counts] = {}  # per user since start, for /metrics

    def _counts(self, now_ms: int, user: str, topic: str) -> Counts:
        hour = hour_of(now_ms)
        keys = self._hours.get(hour)
        if keys is None:
            keys = self._hours[hour] = {}
            self._topics_of[hour] = {}
            for old in sorted(self._hours)[:-HOURS_KEPT]:  # may be this hour itself, when the clock went back
                del self._hours[old]
                del self._topics_of[old]
                self._changed.discard(old)
        if hour in self._hours:
            self._changed.add(hour)
        topics_of = self._topics_of.get(hour, {})
        key = (user, topic)
        found = keys.get(key)
        if found is None and (len(keys) >= KEYS_PER_HOUR_MAX or topics_of.get(user, 0) >= TOPICS_PER_USER_HOUR_MAX):
            key = (user, OTHER)
            if key not in keys and len(keys) >= KEYS_PER_HOUR_MAX + OVERFLOW_USERS_MAX:
                key = (OTHER, OTHER)
            found = keys.get(key)
        if found is None:
            found = keys[key] = Counts()
            topics_of[key[0]] = topics_of.get(key[0], 0) + 1
        return found

    def moved(self, now_ms: int, user: str, topic: str, *, bytes_in: int = 0, records_in: int = 0,
              bytes_out: int = 0, records_out: int = 0, requests: int = 0) -> None:
        counts = self._counts(now_ms, user, topic)
        counts.bytes_in += bytes_in
        counts.records_in += records_in
        counts.bytes_out += bytes_out
        counts.records_out += records_out
        counts.requests += requests
        total = self.totals.get(user)
        if total is None:
            total = self.totals[user] = Counts()
        total.bytes_in += bytes_in
        total.records_in += records_in
        total.bytes_out += bytes_out
        total.records_out += records_out
        total.requests += requests

    def streamed(self, now_ms: int, user: str, topic: str, stream_ms: int) -> None:
        if stream_ms > 0:
            self._counts(now_ms, user, topic).stream_ms += stream_ms

    def stored(self, now_ms: int, sizes: dict[tuple[str, str], int]) -> None:
        """Storage now: bytes held on this node per (owner, topic)."""
        for (owner, topic), size in sizes.items():
            self._counts(now_ms, owner, topic).storage_bytes = size

    def changed_hours(self) -> list[int]:
        return sorted(self._changed)

    def seed(self, hour: int, rows: list[list[object]]) -> None:
        """Add what this node stored for ``hour`` before it (re)started: the hour's record is its
        whole count, so the first write of an hour after a start must include the earlier one.
        Storage keeps the level sampled since, when there is one."""
        counts_of = self._hours.setdefault(hour, {})
        self._topics_of.setdefault(hour, {})
        for row in rows:
            if len(row) < 2 + len(FIELDS) or not all(isinstance(v, int) for v in row[2:2 + len(FIELDS)]):
                continue
            key = (str(row[0]), str(row[1]))
            counts = counts_of.get(key)
            if counts is None:
                if len(counts_of) >= KEYS_PER_HOUR_MAX + OVERFLOW_USERS_MAX + 1:
                    continue
                counts = counts_of[key] = Counts()
            stored = Counts(*row[2:2 + len(FIELDS)])  # type: ignore[arg-type]
            for field in FIELDS[:-1]:
                setattr(counts, field, getattr(counts, field) + getattr(stored, field))
            counts.storage_bytes = counts.storage_bytes or stored.storage_bytes
        self._changed.add(hour)

    def changed(self) -> Iterator[tuple[int, list[list[object]]]]:
        """Every hour counted since the last call, with all its rows ``[user, topic, *FIELDS]``
        (the hour's whole state, so writing it replaces an earlier write of the same hour)."""
        hours, self._changed = sorted(h for h in self._changed if h in self._hours), set()
        for hour in hours:
            yield hour, [[user, topic, *counts.row()] for (user, topic), counts in self._hours[hour].items()]

    def unwritten(self, hours: list[int]) -> None:
        """The write of ``hours`` failed: write them again next time."""
        self._changed.update(h for h in hours if h in self._hours)
