"""Whether the node's storage takes writes: a full disk, and partitions whose log went offline.

A full disk is a state the node leaves by itself: an append that fails with ``StorageFullError``
marks it (the log already cut the failed write back), and the next append that succeeds, or a
maintenance round that finds ``RECOVERED_FREE_BYTES`` free, clears it. Offline logs are read from
the logs themselves (``PartitionLog.offline_reason``), so this object never disagrees with them.
The state feeds ``/readyz`` and the metrics; the write path never waits on it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Final, final

RECOVERED_FREE_BYTES: Final = 4 * 1024 * 1024


@final
class StorageHealth:
    __slots__ = ("_clock_ms", "full_errors", "full_since_ms")

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.full_since_ms: int | None = None
        self.full_errors = 0

    @property
    def full(self) -> bool:
        return self.full_since_ms is not None

    def write_failed_full(self) -> None:
        self.full_errors += 1
        if self.full_since_ms is None:
            self.full_since_ms = self._clock_ms()

    def write_succeeded(self) -> None:
        self.full_since_ms = None

    def space_seen(self, free_bytes: int) -> None:
        """A maintenance round's reading of the free space of the data directory."""
        if free_bytes >= RECOVERED_FREE_BYTES:
            self.full_since_ms = None

    def describe(self, free_bytes: int | None, offline: list[dict[str, Any]]) -> dict[str, Any]:
        return {"full": self.full, "full_since_ms": self.full_since_ms, "full_errors": self.full_errors,
                "free_bytes": free_bytes, "offline_partitions": offline}


def free_bytes(path: str) -> int | None:
    """Bytes available to this process on the filesystem of ``path`` (None when unknown)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def total_bytes(path: str) -> int | None:
    """The size of the filesystem of ``path`` (None when unknown)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_blocks * stat.f_frsize
