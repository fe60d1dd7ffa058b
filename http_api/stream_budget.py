"""A node-wide bound on open push streams (the HTTP layer's own resource)."""

from __future__ import annotations

from typing import Final

STREAMS_MAX: Final = 1_000


class StreamBudget:
    __slots__ = ("limit", "used")

    def __init__(self, limit: int = STREAMS_MAX) -> None:
        self.limit = limit
        self.used = 0
