"""The node's background compaction of its compacted topics (decisions 0321, 0323).

Each maintenance round offers the node's partitions to ``Compactor.offer``, which starts at most
one pass at a time, on a thread of its own (never the flush threads: a pass may take long), for
the partition that needs it most: the highest dirty ratio at or above the topic's
``min_cleanable_dirty_ratio``, or a dirty segment older than ``max_compaction_lag_ms``. A pass
reads and writes at most ``compaction_bytes_per_s`` (one ``Throttle`` shared by every pass) and
never holds a log's lock but for the swap, so appends and fetches go on. A pass never reads past
the replica's high watermark: a record a leader change may still truncate must not supersede a
committed one (decision 0327). Every replica compacts
its own log, leaders and followers alike; the rules depend only on the records (their keys,
offsets and timestamps), so replicas keep the same latest record per key. Internal topics
(``__`` names) are left to their owners, which compact them by snapshot (0143).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from segments.batch import now_ms
from segments.cleaner import PassResult, Throttle, compact
from segments.encryption import NONCE_BYTES, open_batch, seal_batch
from segments.errors import LogClosedError, StorageError
from segments.key_ring import KeyRing
from segments.log import PartitionLog

log = logging.getLogger("logbroker.compactor")

INTERNAL_PREFIX = "__"
# A partition whose pass found nothing cleanable (its dirty segments are within the compaction lag,
# or not yet durable) waits this long before it is offered again, so it cannot starve the others.
IDLE_RETRY_MS = 10_000


class Compactable(Protocol):
    topic: str
    partition: int
    log: PartitionLog
    high_watermark: int


@dataclasses.dataclass(slots=True)
class CompactionStatus:
    """What compaction did to one partition in this process (for metrics and describe)."""

    last_ms: int = 0
    passes: int = 0
    bytes_read: int = 0
    bytes_removed: int = 0
    records_removed: int = 0


def wants_pass(partition_log: PartitionLog, now: int) -> float | None:
    """How much ``partition_log`` needs a pass (its dirty ratio; above 1 when its max lag is
    past), or None when it needs none."""
    config = partition_log.config
    if not config.compacts:
        return None
    ratio = partition_log.dirty_ratio()
    if ratio <= 0:
        return None
    oldest = partition_log.oldest_dirty_timestamp()
    if oldest is not None and oldest < now - config.max_compaction_lag_ms:
        return 1.0 + ratio
    return ratio if ratio >= config.min_cleanable_dirty_ratio else None


class Compactor:
    def __init__(self, rate_bytes_per_s: int, *, ring: KeyRing | None = None,
                 fsync: Callable[[int], None] = os.fsync, clock_ms: Callable[[], int] = now_ms) -> None:
        self.throttle = Throttle(rate_bytes_per_s)
        self._ring = ring
        self._fsync = fsync
        self._clock_ms = clock_ms
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logbroker-compaction")
        self._running: Future[PassResult | None] | None = None
        self._lock = threading.Lock()
        self.status: dict[tuple[str, int], CompactionStatus] = {}
        self._idle_until: dict[tuple[str, int], int] = {}
        self.failures = 0

    def offer(self, replicas: Sequence[Compactable]) -> tuple[str, int] | None:
        """Start a pass on the partition that needs one most, unless a pass is running; returns it."""
        with self._lock:
            if self._running is not None and not self._running.done():
                return None
            now = self._clock_ms()
            best: tuple[float, Compactable] | None = None
            for replica in replicas:
                if replica.topic.startswith(INTERNAL_PREFIX) or replica.log.offline_reason is not None:
                    continue
                if self._idle_until.get((replica.topic, replica.partition), 0) > now:
                    continue
                try:
                    need = wants_pass(replica.log, now)
                except LogClosedError:
                    continue
                if need is not None and (best is None or need > best[0]):
                    best = (need, replica)
            if best is None:
                return None
            chosen = best[1]
            self._running = self._executor.submit(self.run_pass, chosen)
            return chosen.topic, chosen.partition

    def run_pass(self, replica: Compactable) -> PassResult | None:
        """One pass over ``replica``'s log, now (also for tests and an operator's forced pass)."""
        ring = self._ring
        opener = None if ring is None else (lambda b: open_batch(b, ring))
        sealer = None if ring is None else (lambda b: seal_batch(b, ring, os.urandom(NONCE_BYTES)))
        try:
            result = compact(replica.log, now_ms=self._clock_ms(), opener=opener, sealer=sealer,
                             throttle=self.throttle, fsync=self._fsync, end_offset=replica.high_watermark)
        except (OSError, StorageError) as exc:
            self.failures += 1
            log.warning("compaction pass failed; it is tried again later", extra={"fields": {
                "topic": replica.topic, "partition": replica.partition, "error": str(exc)}})
            return None
        key = (replica.topic, replica.partition)
        if result is None:
            self._idle_until[key] = self._clock_ms() + IDLE_RETRY_MS
            return None
        self._idle_until.pop(key, None)
        status = self.status.setdefault(key, CompactionStatus())
        status.last_ms = self._clock_ms()
        status.passes += 1
        status.bytes_read += result.bytes_read
        status.bytes_removed += result.bytes_read - result.bytes_after
        status.records_removed += result.records_removed
        return result

    @property
    def running(self) -> bool:
        """True while a pass runs."""
        with self._lock:
            return self._running is not None and not self._running.done()

    def forget(self, topic: str, partition: int) -> None:
        self.status.pop((topic, partition), None)
        self._idle_until.pop((topic, partition), None)

    def close(self) -> None:
        """Wait for a running pass (it is throttled, so bounded by one segment set) and stop."""
        self._executor.shutdown(wait=True)
