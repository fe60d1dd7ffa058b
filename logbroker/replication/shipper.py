"""Ships appended batches from this node's leaderships to one follower node (DESIGN §6).

One ``Shipper`` per follower node, not per partition: each ``Replicate`` call carries every
partition this node leads that the follower replicates and that has something to send (batches
from the follower's log end, a high watermark it has not seen, or an ``align`` entry when its log
end is not known), bounded by ``SHIPMENT_BYTES_MAX``. One call is in flight at a time, so entries of a
partition arrive in order; what was appended meanwhile goes in the next call, which batches under
load and costs one round trip when idle. An append wakes the shipper; with nothing to send it
wakes every ``IDLE_S`` to keep the follower's high watermark current.

A failed call forgets what the leader knew of the follower's log ends (the next call aligns) and
backs off, up to ``BACKOFF_MAX_S``; a follower that registers again ends the backoff (``hurry``).
Each entry's answer is taken by its code
(``internal_rpc.messages.ReplicationCode``): ``stale_leader_epoch`` means another node leads now
(the leadership is ended here at once, ``on_stale``); ``non_sequential_append`` aligns the
partition in the next call, sent at once; ``unknown_partition`` and ``storage_error`` align it
when the shipper next wakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from internal_rpc.messages import ReplicateAnswer, ReplicateRequest, ShipmentEntry, ShipmentResult
from logbroker.errors import BrokerError
from logbroker.partition_state import caught_up
from logbroker.replication.leader import Leadership, now_ms
from segments.errors import StorageError

log = logging.getLogger(__name__)
SHIPMENT_BYTES_MAX: Final = 8 * 1024 * 1024
PARTITION_BYTES_MAX: Final = 1024 * 1024
IDLE_S: Final = 0.5
BACKOFF_MIN_S: Final = 0.05
BACKOFF_MAX_S: Final = 1.0
STUCK_CALL_S: Final = 0.5  # a call unanswered this long is given up when the follower registers again

Call = Callable[[int, ReplicateRequest], Awaitable[ReplicateAnswer]]


@dataclasses.dataclass
class ShipmentCounts:
    """What went to one follower since the node started (counters for the node's metrics):
    ``Replicate`` calls answered, their partition entries and the bytes of batches they carried."""

    calls: int = 0
    entries: int = 0
    bytes: int = 0


class Shipper:
    def __init__(self, follower: int, leaderships: Callable[[int], list[Leadership]], call: Call,
                 topic_id: Callable[[str], str | None], on_stale: Callable[[Leadership, int], None],
                 counts: ShipmentCounts | None = None) -> None:
        self.follower = follower
        self._leaderships = leaderships
        self._call = call
        self._topic_id = topic_id
        self._on_stale = on_stale
        self._wake = asyncio.Event()
        self._hurry = asyncio.Event()  # ends a backoff: the follower (re)registered just now
        self._calling_since: float | None = None  # loop time the call in flight was sent
        self._task: asyncio.Task[None] | None = None
        self.counts = ShipmentCounts() if counts is None else counts

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"ship-to-{self.follower}")

    def wake(self) -> None:
        self._wake.set()

    def hurry(self) -> None:
        """Try the follower at once: it has registered again (a restart, a session back after a
        cut), so it may be reachable now. This ends a backoff after failed calls, and gives up a
        call unanswered for ``STUCK_CALL_S`` (sent into the cut, it would wait out its whole
        deadline) so that the next one goes at once (decision 0383)."""
        self._hurry.set()
        self._wake.set()
        task, since = self._task, self._calling_since
        if task is not None and since is not None and asyncio.get_running_loop().time() - since >= STUCK_CALL_S:
            task.cancel()
            self._task = None
            self.start()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        failing_since: float | None = None  # the loop time of the first failed call in a row
        loop = asyncio.get_running_loop()
        while True:
            if not self._wake.is_set():  # under load it is set already: no timer, no task
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(IDLE_S):
                        await self._wake.wait()
            self._wake.clear()
            started = loop.time()
            try:
                more = await self.ship_once()
            except asyncio.CancelledError:
                raise
            except BrokerError as exc:
                if failing_since is None:
                    failing_since = started
                    log.info("shipments to node %d failing", self.follower, extra={"fields": {
                        "follower": self.follower, "error": str(exc), "call_s": round(loop.time() - started, 3)}})
                backoff = BACKOFF_MIN_S if await self._backoff(backoff) else min(backoff * 2, BACKOFF_MAX_S)
                continue
            except Exception:
                log.exception("shipment failed", extra={"fields": {"follower": self.follower}})
                await self._backoff(BACKOFF_MAX_S)
                continue
            if failing_since is not None:
                log.info("shipments to node %d resumed", self.follower, extra={"fields": {
                    "follower": self.follower, "failed_for_s": round(started - failing_since, 3),
                    "call_s": round(loop.time() - started, 3)}})
                failing_since = None
            backoff = BACKOFF_MIN_S
            if more:
                self._wake.set()

    async def _backoff(self, delay_s: float) -> bool:
        """Wait ``delay_s`` after a failed call, or less when ``hurry`` is called (True then)."""
        self._hurry.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay_s):
                await self._hurry.wait()
                return True
        return False

    async def ship_once(self) -> bool:
        """Send one call; True when more is waiting to be sent."""
        entries: list[ShipmentEntry] = []
        sent: list[tuple[Leadership, int]] = []  # leadership, the leader's log end when it was sent
        budget = SHIPMENT_BYTES_MAX
        more = False
        for leadership in self._leaderships(self.follower):
            if budget <= 0:
                more = True
                break
            entry = self._entry(leadership, min(budget, PARTITION_BYTES_MAX))
            if entry is None:
                continue
            budget -= len(entry.data)
            entries.append(entry)
            sent.append((leadership, leadership.replica.log.log_end_offset))
        if not entries:
            return more
        self._calling_since = asyncio.get_running_loop().time()
        try:
            answer = await self._call(self.follower, ReplicateRequest(entries=entries))
        except BaseException:
            for leadership, _ in sent:
                progress = leadership.followers.get(self.follower)
                if progress is not None:
                    progress.log_end = None
            raise
        finally:
            self._calling_since = None
        results = answer.results
        if len(results) != len(entries):
            raise BrokerError(f"node {self.follower} answered a shipment without its results")
        counts = self.counts
        counts.calls += 1
        counts.entries += len(entries)
        counts.bytes += SHIPMENT_BYTES_MAX - budget
        at = now_ms()
        for (leadership, leader_end), entry, result in zip(sent, entries, results, strict=True):
            more |= self._take_result(leadership, entry, result, leader_end, at)
        return more

    def _entry(self, leadership: Leadership, max_bytes: int) -> ShipmentEntry | None:
        progress = leadership.followers.get(self.follower)
        if progress is None or leadership.closed:
            return None
        replica = leadership.replica
        partition_log = replica.log
        topic_id = self._topic_id(replica.topic)
        if topic_id is None:
            return None
        entry = functools.partial(ShipmentEntry, topic=replica.topic, topic_id=topic_id, partition=replica.partition,
                                  epoch=leadership.epoch, high_watermark=replica.high_watermark,
                                  leader_end=partition_log.log_end_offset, leader_start=partition_log.log_start_offset)
        if progress.log_end is None or progress.log_end < partition_log.log_start_offset:
            return entry(align=True, leader_epochs=tuple(partition_log.epoch_entries()))
        if progress.log_end < partition_log.log_end_offset:
            try:
                first, data = leadership.shipment(progress.log_end, max_bytes)
            except StorageError as exc:  # this partition only (deleted, offline): the others go on
                log.debug("nothing shipped", extra={"fields": {"topic": replica.topic, "error": str(exc)}})
                progress.log_end = None
                return None
            if first < progress.log_end and data:
                progress.log_end = None  # not a batch boundary here: align again
                return None
            # A first offset above the follower's end is a gap compaction left (decision 0321);
            # the follower's compacted log takes it.
            return entry(start=progress.log_end, data=data)
        if progress.high_watermark_sent < replica.high_watermark:
            return entry(start=progress.log_end)
        return None

    def _take_result(self, leadership: Leadership, entry: ShipmentEntry, result: ShipmentResult, leader_end: int,
                at: int) -> bool:
        progress = leadership.followers.get(self.follower)
        if progress is None:
            return False
        end = result.log_end
        if result.error == "stale_leader_epoch":
            self._on_stale(leadership, result.epoch if result.epoch is not None else leadership.epoch + 1)
            return False
        if result.error == "non_sequential_append":  # not where the leader thought: align, at once
            progress.log_end = None
            return True
        if result.error is not None or end is None:  # unknown_partition (not open there yet), storage_error
            progress.log_end = None
            return False
        caught_up(progress, end, leader_end, at)
        progress.high_watermark_sent = max(progress.high_watermark_sent, entry.high_watermark)
        leadership.recompute()
        return end < leadership.replica.log.log_end_offset
