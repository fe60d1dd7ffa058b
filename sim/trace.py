"""The event trace of one simulated run: ``(virtual time, event)`` lines, hashed as they come.

The hash (sha256 over ``"<time in µs> <event>\\n"`` lines) is the run's fingerprint: one seed,
one hash, on every machine and in every process. Only the last ``KEEP_MAX`` lines are kept in
memory (to print beside a failure); the hash covers all of them.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
from typing import Final

KEEP_MAX: Final = 200


class Trace:
    def __init__(self, keep_max: int = KEEP_MAX) -> None:
        self._hash = hashlib.sha256()
        self.tail: collections.deque[str] = collections.deque(maxlen=keep_max)
        self.count = 0

    def add(self, now_s: float, event: str) -> None:
        assert "\n" not in event, event
        line = f"{round(now_s * 1_000_000)} {event}"
        self._hash.update(line.encode() + b"\n")
        self.tail.append(line)
        self.count += 1

    def digest(self) -> str:
        return self._hash.hexdigest()


FAILURES_KEPT_MAX: Final = 10  # a seed's broken invariants quoted in its report


class Judged:
    """A schedule's trace of events and the invariants it saw broken (the first
    ``FAILURES_KEPT_MAX`` quoted; every one is in the trace)."""

    loop: asyncio.AbstractEventLoop
    trace: Trace
    failures: list[str]

    def event(self, text: str) -> None:
        self.trace.add(self.loop.time(), text)

    def fail(self, invariant: str, detail: str) -> None:
        self.event(f"FAIL {invariant}: {detail}")
        if len(self.failures) < FAILURES_KEPT_MAX:
            self.failures.append(f"{invariant}: {detail}")
