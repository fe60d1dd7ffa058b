"""The one place where what a user moves is charged to their quota and counted for usage.

Every path that charges produce or fetch bytes to a user's quota (the HTTP middleware, produce
streams, paced push streams, gRPC) calls ``Meter.charge``, which charges the quota and counts the
same bytes in the usage ledger, so usage never disagrees with what quotas saw. Open streams are
counted by ``streaming``: their time is credited to the hour it passes in (``credit_streams`` at
each write of the ledger, and when the stream ends). Time is wall-clock milliseconds (usage hours
are calendar hours).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Final

from logbroker.auth.quotas import QuotaKind, QuotaLimits, Quotas
from logbroker.metering.ledger import UsageLedger

STREAMS_TRACKED_MAX: Final = 100_000  # open streams timed at once (each also holds a node stream slot)


@dataclasses.dataclass(slots=True)
class _OpenStream:
    user: str
    topic: str
    since_ms: int  # credited up to here


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Meter:
    def __init__(self, quotas: Quotas, ledger: UsageLedger | None = None,
                 clock_ms: Callable[[], int] = wall_ms) -> None:
        self.quotas = quotas
        self.ledger = ledger or UsageLedger()
        self._clock_ms = clock_ms
        self._streams: dict[int, _OpenStream] = {}
        self._tokens = itertools.count()

    def charge(self, user: str, kind: QuotaKind, limits: QuotaLimits | None, size_bytes: int, *, topic: str,
               records: int = 0, requests: int = 1) -> None:
        """``user`` moved ``size_bytes`` (``records`` of them) of ``topic``: charged to their ``kind``
        quota (``limits`` None: quotas are off) and counted, with ``requests`` calls."""
        if limits is not None and size_bytes > 0:
            self.quotas.charge(user, kind, limits, size_bytes)
        now = self._clock_ms()
        if kind == "produce":
            self.ledger.moved(now, user, topic, bytes_in=size_bytes, records_in=records, requests=requests)
        else:
            self.ledger.moved(now, user, topic, bytes_out=size_bytes, records_out=records, requests=requests)

    @contextlib.contextmanager
    def streaming(self, user: str, topic: str) -> Iterator[None]:
        """Count a stream ``user`` opens on ``topic`` (a group's: ``group:<name>``) as a request,
        and the time it stays open."""
        self.ledger.moved(self._clock_ms(), user, topic, requests=1)
        if len(self._streams) >= STREAMS_TRACKED_MAX:
            yield
            return
        token = next(self._tokens)
        self._streams[token] = _OpenStream(user, topic, self._clock_ms())
        try:
            yield
        finally:
            ended = self._streams.pop(token)
            now = self._clock_ms()
            self.ledger.streamed(now, ended.user, ended.topic, now - ended.since_ms)

    def credit_streams(self) -> None:
        """Credit every open stream's time up to now (so a stream open for hours counts in each)."""
        now = self._clock_ms()
        for stream in self._streams.values():
            self.ledger.streamed(now, stream.user, stream.topic, now - stream.since_ms)
            stream.since_ms = now
