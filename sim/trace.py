"""The event trace of one simulated run: ``(virtual time, event)`` lines, hashed as they come.

The hash (sha256 over ``"<time in µs> <event>\\n"`` lines) is the run's fingerprint: one seed,
one hash, on every machine and in every process. Only the last ``KEEP_MAX`` lines are kept in
memory (to print beside a failure); the hash covers all of them.
"""

from __future__ import annotations

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
