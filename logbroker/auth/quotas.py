"""Per-user byte-rate quotas (token buckets) and a per-user connection count (pure: no I/O).

A bucket holds at most ``burst`` bytes and refills at ``rate`` bytes/s. A request is let in when
the bucket is not in debt and is charged its real size afterwards (which may drive the bucket
below zero, as a fetch's size is known only once it is read); while in debt, requests are refused
with the time until the debt is repaid, which the HTTP layer sends as ``Retry-After``. So a user
gets their rate on average and one request of any size cannot be starved. Time comes from the
caller (``now`` in seconds, monotonic).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

QuotaKind = Literal["produce", "fetch"]
BURST_S: Final = 1.0
USERS_MAX: Final = 100_000
# Debt under a byte is no debt: waiting exactly the delay a bucket named leaves float rounding's
# residue (a fraction of a byte, growing with the clock's value and the rate), which would refuse
# the request that waited for it.
DEBT_TOLERANCE_BYTES: Final = 1.0


class TokenBucket:
    __slots__ = ("burst", "rate", "tokens", "updated")

    def __init__(self, rate: float, now: float, *, burst: float | None = None) -> None:
        assert rate > 0
        self.rate = rate
        self.burst = rate * BURST_S if burst is None else burst
        self.tokens = self.burst
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def delay_s(self, now: float) -> float:
        """0 when a request may go now, else the seconds until the debt is repaid."""
        self._refill(now)
        return 0.0 if self.tokens >= -DEBT_TOLERANCE_BYTES else -self.tokens / self.rate

    def charge(self, size_bytes: int, now: float) -> None:
        self._refill(now)
        self.tokens -= size_bytes


@dataclasses.dataclass(frozen=True, slots=True)
class QuotaLimits:
    """Bytes per second, concurrent connections, and what a user may hold at once (0: unlimited
    for each): topics and queues owned, their partitions, open push streams, waiting long-polls,
    consumer groups owned, group members and the bytes stored in what they own. The holding
    limits do not apply to admins."""

    produce_bytes_per_s: int = 0
    fetch_bytes_per_s: int = 0
    connections_max: int = 0
    topics_max: int = 0
    partitions_max: int = 0
    streams_max: int = 0
    long_polls_max: int = 0
    groups_max: int = 0
    group_members_max: int = 0
    storage_bytes_max: int = 0

    def override(self, per_user: Mapping[str, int]) -> QuotaLimits:
        return dataclasses.replace(self, **{k: v for k, v in per_user.items() if hasattr(self, k)})

    def rate(self, kind: QuotaKind) -> int:
        return self.produce_bytes_per_s if kind == "produce" else self.fetch_bytes_per_s


class Quotas:
    """Buckets per (user, kind), created on first use with that user's limits. A user's buckets
    are rebuilt when their limits change. At most ``USERS_MAX`` users are tracked; beyond it the
    idlest buckets are dropped (they start full again, which only favours the user)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._buckets: dict[tuple[str, QuotaKind], tuple[int, TokenBucket]] = {}

    def delay_s(self, user: str, kind: QuotaKind, limits: QuotaLimits) -> float:
        bucket = self._bucket(user, kind, limits)
        return 0.0 if bucket is None else bucket.delay_s(self._clock())

    def charge(self, user: str, kind: QuotaKind, limits: QuotaLimits, size_bytes: int) -> None:
        bucket = self._bucket(user, kind, limits)
        if bucket is not None and size_bytes > 0:
            bucket.charge(size_bytes, self._clock())

    def _bucket(self, user: str, kind: QuotaKind, limits: QuotaLimits) -> TokenBucket | None:
        rate = limits.rate(kind)
        if rate <= 0:
            return None
        entry = self._buckets.get((user, kind))
        if entry is None or entry[0] != rate:
            if len(self._buckets) >= USERS_MAX:
                idlest = min(self._buckets, key=lambda k: self._buckets[k][1].updated)
                del self._buckets[idlest]
            entry = (rate, TokenBucket(rate, self._clock()))
            self._buckets[(user, kind)] = entry
        return entry[1]


class ConnectionCounter:
    """Open connections per user. A connection is any object with a ``transport`` attribute that
    becomes None (or a closing transport) once it is lost, as aiohttp's request handlers do; closed
    ones are dropped lazily, whenever that user's count is asked for."""

    def __init__(self) -> None:
        self._by_user: dict[str, set[Any]] = {}

    def admit(self, user: str, connection: Any, limit: int) -> bool:
        """Count ``connection`` for ``user``; False when that would exceed ``limit``. With no
        limit (0) nothing is tracked."""
        if limit <= 0:
            return True
        held = self._by_user.setdefault(user, set())
        if connection in held:
            return True
        held.difference_update([c for c in held if _closed(c)])
        if limit and len(held) >= limit:
            return False
        held.add(connection)
        return True


def _closed(connection: Any) -> bool:
    transport = getattr(connection, "transport", None)
    return transport is None or transport.is_closing()
