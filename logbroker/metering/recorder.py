"""Writes this node's usage ledger to the coordinator, and samples the storage it holds.

Every ``usage_flush_ms`` (a node setting; and before ``GET /v1/usage`` reads, so a node's own counts are never behind
its answer) the node credits open streams, samples the bytes of every replica it holds per
(owner, topic) (the sizes its logs keep in memory: no I/O), and writes each hour whose counts
changed, whole (``UsageLedger.changed``), as one coordinator record per node and hour: etcd on a
cluster (replicated), the data dir on a single node. A failed write is retried at the next
round; what a crash loses is at most one round of this node's counts. Once an hour, records older
than the retention are dropped (by every node: the deletes are idempotent).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from coordinator.base import Coordinator
from logbroker.metering.ledger import DAY_MS, HOUR_MS, HOURS_KEPT
from logbroker.metering.meter import Meter
from logbroker.replica_manager import Replica

log = logging.getLogger(__name__)


def storage_by_owner(replicas: Iterable[Replica], owner_of: Callable[[str], str | None]) -> dict[tuple[str, str], int]:
    """Bytes held per (owner, topic) across ``replicas`` (internal and ownerless topics left out)."""
    sizes: dict[tuple[str, str], int] = {}
    for replica in replicas:
        owner = owner_of(replica.topic)
        if owner is None or replica.log.offline_reason is not None:
            continue
        key = (owner, replica.topic)
        sizes[key] = sizes.get(key, 0) + replica.log.size_bytes
    return sizes


class UsageRecorder:
    def __init__(self, meter: Meter, coordinator: Coordinator, node_id: int, retention_days: int,
                 replicas: Callable[[], Iterable[Replica]], owner_of: Callable[[str], str | None], *,
                 clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self._meter = meter
        self._coordinator = coordinator
        self._node_id = node_id
        self._retention_ms = retention_days * DAY_MS
        self._replicas = replicas
        self._owner_of = owner_of
        self._clock_ms = clock_ms
        self._lock = asyncio.Lock()  # one write round at a time (the loop's and a reader's)
        self._dropped_hour = -1
        self._seeded: set[int] = set()  # hours whose stored record (from before a restart) is counted in

    async def flush(self) -> None:
        """Write every changed hour now."""
        async with self._lock:
            now = self._clock_ms()
            self._meter.credit_streams()
            self._meter.ledger.stored(now, storage_by_owner(self._replicas(), self._owner_of))
            await self._seed(self._meter.ledger.changed_hours())
            changed = list(self._meter.ledger.changed())
            for n, (hour, rows) in enumerate(changed):
                try:
                    await self._coordinator.put_usage(hour, self._node_id, rows)
                except BaseException:
                    self._meter.ledger.unwritten([h for h, _ in changed[n:]])
                    raise
            hour = now - now % HOUR_MS
            self._seeded = {h for h in self._seeded if hour - HOUR_MS * HOURS_KEPT <= h <= hour}
            if self._retention_ms > 0 and hour != self._dropped_hour:
                await self._coordinator.drop_usage_before(hour - self._retention_ms)
                self._dropped_hour = hour

    async def _seed(self, hours: list[int]) -> None:
        """Before an hour's first write by this process: count in what this node stored for it
        before (a restart within the hour), so the write replaces it with the whole hour."""
        todo = [h for h in hours if h not in self._seeded]
        if not todo:
            return
        for hour, node, rows in await self._coordinator.usage_between(min(todo), max(todo) + HOUR_MS):
            if node == self._node_id and hour in todo:
                self._meter.ledger.seed(hour, rows)
        self._seeded.update(todo)
