"""The bytes each user stores, and the per-user storage quota (pure: sums in, decisions out).

A user pays for the partitions of the topics and queues they own (``logbroker.ownership``),
each counted once, at its leader's size. A node knows its own part exactly enough: a recount
from its led partitions' logs (in memory, no directory walk) replaces its sums periodically, and
every append in between adds its batch's size, so the hot path only adds and compares. Another
node's part is what that node last said of its own led partitions, kept for at most
``peer_stale_s`` (a node that stops answering stops being counted; its partitions' new leaders
count them). A write is refused when its payer's bytes plus the write's would pass their
``storage_bytes_max``: the limit is exact on one node, and on a cluster off by what the other
nodes stored since they last answered.

Concurrency: one event loop owns a ledger; no method awaits.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Final

from logbroker.errors import StorageQuotaExceededError

PAYERS_TOLD_MAX: Final = 100_000  # the largest payers a node tells a peer of (bounds the answer)


class StorageLedger:
    def __init__(self, *, peer_stale_s: float) -> None:
        assert peer_stale_s > 0
        self.peer_stale_s = peer_stale_s
        self._local: dict[str, int] = {}
        self._peers: dict[int, tuple[float, dict[str, int]]] = {}

    def recounted(self, sums: Mapping[str, int]) -> None:
        """This node's led partitions' sizes per payer, counted now (replaces what was added)."""
        self._local = {payer: size for payer, size in sums.items() if size > 0}

    def appended(self, payer: str, size_bytes: int) -> None:
        self._local[payer] = self._local.get(payer, 0) + size_bytes

    def heard(self, node_id: int, sums: Mapping[str, int], now_s: float) -> None:
        """What node ``node_id`` said at ``now_s`` of its own led partitions."""
        self._peers[node_id] = (now_s, {p: s for p, s in sums.items() if isinstance(s, int) and s > 0})

    def forget(self, now_s: float) -> None:
        """Drop what peers said longer than ``peer_stale_s`` ago."""
        for node_id in [n for n, (at, _) in self._peers.items() if now_s - at > self.peer_stale_s]:
            del self._peers[node_id]

    def used(self, payer: str, now_s: float) -> int:
        total = self._local.get(payer, 0)
        for at, sums in self._peers.values():
            if now_s - at <= self.peer_stale_s:
                total += sums.get(payer, 0)
        return total

    def local_sums(self, limit: int = PAYERS_TOLD_MAX) -> dict[str, int]:
        """This node's sums for a peer: the ``limit`` largest."""
        if len(self._local) <= limit:
            return dict(self._local)
        return dict(heapq.nlargest(limit, self._local.items(), key=lambda item: item[1]))


def check_storage(payer: str, topic: str, limit_bytes: int, used_bytes: int, incoming_bytes: int) -> None:
    """Refuse (``StorageQuotaExceededError``) a write of ``incoming_bytes`` to ``topic`` that would
    take its payer past ``limit_bytes`` (0: unlimited)."""
    if limit_bytes <= 0 or used_bytes + incoming_bytes <= limit_bytes:
        return
    raise StorageQuotaExceededError(
        f"{topic!r} belongs to {payer!r}, who stores {used_bytes} bytes; this write of {incoming_bytes} bytes would "
        f"pass their storage_bytes_max of {limit_bytes}: free space (delete data or lower retention) or have an "
        "admin raise the limit", owner=payer, limit="storage_bytes_max", limit_value=limit_bytes,
        used_bytes=used_bytes)
