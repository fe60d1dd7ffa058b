"""Queues: per-message leases, acks, nacks and dead-lettering over a queue topic's partitions.

Each queue keeps its share state (``PartitionShare`` per partition) in memory and every change as
an event in its own internal topic ``__queue_state.<topic id>`` (one partition per queue
partition, with the queue's flush policy). On start the events are replayed, so a restart loses no
ack and the messages that were in flight come back when their leases expire.

Order of work for each call: check the input, change the share state (synchronously: two receives
never lease the same message), append the event (synchronously, so the log's order is the order
of the changes), then await the event's durability and only then answer. Reading the leased
records goes through a node-wide cache of decoded batches bounded in bytes (``BatchCache``), so a
receive of 100 from a producer's batch of 1000 does not decode the batch ten times.

Dead letters go only to the topic the queue is bound to by id (decision 0173): the ``Produce``
callback refuses (``DeadLetterRefusedError``) when that topic is gone or the queue's owner may no
longer write to it, and the messages are then withheld: done in the state log with the reason
(``D`` event), counted (``on_withheld``), logged, and never written anywhere. Headers named like
the broker's own (``x-logbroker-*``) are taken off a record before its origin is stamped on it.

A stored batch whose records cannot be decoded (accepted before produce checked every row,
decision 0220) costs a queue only those records: the ones before its first bad record and every
other batch are delivered as usual, and its undecodable messages are finished as withheld dead
letters (reason ``unreadable``: a ``D`` event, counted and logged) the first time a receive or the
dead-letter sweep meets them, since no delivery could ever carry them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from coordinator.errors import CoordinatorError
from coordinator.models import TopicMetadata, TopicSpec
from logbroker.errors import BrokerError, DeadLetterRefusedError, LeaseExpiredError, NotAQueueError, NotLeaderError
from logbroker.internal_log import InternalLog, InternalRecord, pack, unpack
from logbroker.loop_share import LoopShare
from logbroker.queues.batch_cache import BATCHES_PER_PARTITION_MAX, BatchCache, DecodedBatch, decoded
from logbroker.queues.requests import Receipt, ReceiveRequest
from logbroker.queues.share_state import (
    PartitionShare,
    ack_event,
    dead_event,
    lease_event,
    nack_event,
    withdraw_event,
)
from logbroker.records import IncomingRecord, is_reserved_header, render_records
from logbroker.replica_manager import Replica, ReplicaManager
from segments.batch import BATCH_RECORDS_MAX, ProducerRecord, Record, decode_records, iter_batches
from segments.errors import InvalidBatchError, StorageError
from segments.record_reader import iter_records

log = logging.getLogger(__name__)
STATE_TOPIC_PREFIX: Final = "__queue_state."
EVENT_KEY: Final = b"q"
READ_BYTES: Final = 1 << 20
WAIT_SLICE_MS_MIN: Final = 5
SNAPSHOT_WAIT_S: Final = 10.0
DEAD_LETTER_RETRY_S: Final = 1.0
UNREADABLE: Final = "unreadable"  # why messages of an undecodable stored batch are withheld
# (queue, dead-letter topic, the id it is bound to, records): append them or raise DeadLetterRefusedError.
Produce = Callable[[str, str, str | None, list[IncomingRecord]], Awaitable[Any]]
Withheld = Callable[[str, str, int], None]


def state_topic(meta: TopicMetadata) -> str:
    return STATE_TOPIC_PREFIX + meta.topic_id


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass
class Queue:
    meta: TopicMetadata
    max_deliveries: int
    dead_letter_topic: str
    dead_letter_id: str | None
    visibility_ms: int
    events: InternalLog
    shares: list[PartitionShare]
    rotation: int = 0
    dead_letter_retry_at: float = 0.0  # monotonic seconds: after a failed copy, the sweep waits

    @property
    def name(self) -> str:
        return self.meta.name


class QueueManager:
    def __init__(self, replicas: ReplicaManager, produce: Produce, *,
                 clock_ms: Callable[[], int] = wall_ms, on_withheld: Withheld = lambda queue, reason, count: None,
                 check_managed: Callable[[str], None] = lambda name: None) -> None:
        """``check_managed(name)`` raises when ``name`` is a queue this node does not manage now
        (a cluster's queue whose leadership is elsewhere or moving)."""
        self._replicas = replicas
        self._check_managed = check_managed
        self._produce = produce
        self._on_withheld = on_withheld
        self._clock_ms = clock_ms
        self._queues: dict[str, Queue] = {}
        self._snapshots: set[asyncio.Future[int]] = set()
        self.batches = BatchCache()

    # ---- lifecycle -----------------------------------------------------------------------------

    async def open(self, meta: TopicMetadata, events: InternalLog, dead_letter_id: str | None, *,
                   still_led: Callable[[], bool] = lambda: True) -> int:
        """Rebuild a queue's share state from its event log; returns the events replayed.
        ``dead_letter_id`` is the id of the topic its dead letters go to (None: none may). The
        loop is given back every few milliseconds (``LoopShare``): the queue is served only once
        this returns, and only if ``still_led()`` says the leaderships it was read under still
        hold (else ``NotLeaderError``, nothing published)."""
        settings = TopicSpec(meta.name, meta.partitions, None, meta.kind, meta.config).queue_settings()
        shares = [PartitionShare(settings["max_deliveries"]) for _ in range(meta.partitions)]
        count = 0
        share_of_loop = LoopShare()
        for partition, share in enumerate(shares):
            for record in events.replay(partition):
                count += 1
                if share_of_loop.due():
                    await share_of_loop.take()
                try:
                    share.apply(unpack(record.value))
                except (ValueError, TypeError, KeyError, IndexError) as exc:  # msgpack errors are ValueErrors
                    log.error("skipping an unreadable queue state event", extra={"fields": {
                        "queue": meta.name, "partition": partition, "offset": record.offset, "error": str(exc)}})
            share.after_replay(self._clock_ms())
        if not still_led():
            raise NotLeaderError(f"queue {meta.name}: its leadership changed while its state was replayed; retry")
        self._queues[meta.name] = Queue(meta, settings["max_deliveries"], settings["dead_letter_topic"],
                                        dead_letter_id, settings["visibility_timeout_ms"],
                                        events, shares)
        return count

    def grow(self, meta: TopicMetadata, state_replicas: Sequence[Replica]) -> None:
        """Take on partitions added to a queue: each starts with no deliveries, and receivers take
        from it from their next call (the queue's object is kept, so waiting receivers see it)."""
        queue = self.get(meta.name)
        queue.events.grow_to(state_replicas)
        for _ in range(len(queue.shares), meta.partitions):
            queue.shares.append(PartitionShare(queue.max_deliveries))
        queue.meta = meta

    def reconfigure(self, meta: TopicMetadata) -> None:
        """Take a managed queue's changed ``max_deliveries`` and ``visibility_timeout_ms`` from now
        on: deliveries already counted keep their count, leases already given keep their deadline."""
        queue = self._queues.get(meta.name)
        if queue is None:
            return
        settings = TopicSpec(meta.name, meta.partitions, None, meta.kind, meta.config).queue_settings()
        queue.meta = meta
        queue.max_deliveries = settings["max_deliveries"]
        queue.visibility_ms = settings["visibility_timeout_ms"]
        for share in queue.shares:
            share.max_deliveries = queue.max_deliveries

    def names(self) -> list[str]:
        return sorted(self._queues)

    def has(self, name: str) -> bool:
        return name in self._queues

    def remove(self, name: str) -> None:
        queue = self._queues.pop(name, None)
        if queue is not None:
            self.batches.drop(queue.meta.topic_id)

    def get(self, name: str) -> Queue:
        queue = self._queues.get(name)
        if queue is None:
            self._check_managed(name)
            self._replicas.partitions(name)  # unknown topic: 404
            raise NotAQueueError(f"{name!r} is a topic, not a queue")
        return queue

    def _record(self, queue: Queue, partition: int, event: list[Any]) -> Awaitable[None]:
        durable = queue.events.append(partition, [InternalRecord(EVENT_KEY, pack(event))])
        if queue.events.wants_snapshot(partition, lambda: 1):
            snapshot = queue.shares[partition].snapshot_event()
            task = asyncio.ensure_future(queue.events.snapshot(partition, [InternalRecord(EVENT_KEY, pack(snapshot))]))
            self._snapshots.add(task)
            task.add_done_callback(self._snapshot_done)
        return durable

    async def wait_snapshots(self, timeout_s: float = SNAPSHOT_WAIT_S) -> None:
        """Wait (bounded) for the snapshots being written (shutdown, tests)."""
        if self._snapshots:
            await asyncio.wait(list(self._snapshots), timeout=timeout_s)

    def _snapshot_done(self, task: asyncio.Future[int]) -> None:
        self._snapshots.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("queue state snapshot failed; the older events stay", extra={"fields": {
                "error": str(task.exception())}})

    # ---- receive -------------------------------------------------------------------------------

    async def receive(self, name: str, request: ReceiveRequest, *, binary: bool = False) -> list[dict[str, Any]]:
        """Lease and return messages: JSON-ready (bytes as UTF-8 or ``*_b64``) or, with ``binary``,
        msgpack-ready (key, value and header values as bytes)."""
        queue = self.get(name)
        visibility = request.visibility_timeout_ms or queue.visibility_ms
        deadline = time.monotonic() + request.wait_ms / 1000
        leased: list[tuple[int, int, list[int]]] = []
        durable: list[Awaitable[None]] = []
        gathered = False  # ``durable`` handed to gather (else nothing awaits it yet)
        try:
            while True:
                self._acquire(queue, request.max_messages, visibility, leased, durable)
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if leased or remaining_ms <= 0:
                    break
                await self._wait(queue, remaining_ms)
            gathered = True
            await asyncio.gather(*durable)
            messages: list[dict[str, Any]] = []
            settled: list[Awaitable[None]] = []
            for partition, token, offsets in leased:
                messages.extend(self._render(queue, partition, token, offsets, binary, settled))
            await asyncio.gather(*settled)
        except BaseException:  # no client gets these leases: they are not deliveries
            if not gathered:
                _let_run(durable)
            self._withdraw(queue, leased)
            raise
        return messages

    def _acquire(self, queue: Queue, wanted: int, visibility_ms: int, leased: list[tuple[int, int, list[int]]],
                 durable: list[Awaitable[None]]) -> None:
        """Lease up to ``wanted`` messages under one new token, adding each partition's lease to
        ``leased`` the moment it is taken (so a failure part-way can undo it) and its event's
        durability to ``durable``."""
        token = secrets.randbits(63) or 1
        now = self._clock_ms()
        count = len(queue.shares)
        start, queue.rotation = queue.rotation, queue.rotation + 1
        for i in range(count):
            if wanted <= 0:
                break
            partition = (start + i) % count
            hwm = self._replicas.get(queue.name, partition).high_watermark
            offsets = queue.shares[partition].acquire(now, wanted, visibility_ms, hwm, token)
            if offsets:
                leased.append((partition, token, offsets))
                durable.append(self._record(queue, partition, lease_event(token, now + visibility_ms, offsets)))
                wanted -= len(offsets)

    def _withdraw(self, queue: Queue, leased: list[tuple[int, int, list[int]]]) -> None:
        """Undo the leases of a receive that failed before it answered; the events are recorded
        without waiting (the state log is what just failed). Should they be lost while the lease
        events stay, a replay counts those deliveries: at most one too many per failed receive."""
        for partition, token, offsets in leased:
            queue.shares[partition].withdraw(offsets, token)
            try:
                recorded = asyncio.ensure_future(self._record(queue, partition, withdraw_event(token, offsets)))
            except Exception as exc:  # not appended either: the receive's own error is the one to raise
                log.debug("a withdrawn lease's event was not appended", extra={"fields": {"error": str(exc)}})
                continue
            recorded.add_done_callback(_log_failure)

    async def _wait(self, queue: Queue, remaining_ms: int) -> None:
        """Until new data arrives in a partition, a lease or delay falls due, or ``remaining_ms``."""
        now = self._clock_ms()
        deadlines = [d - now for d in (s.next_deadline() for s in queue.shares) if d is not None]
        timeout_ms = max(WAIT_SLICE_MS_MIN, min([remaining_ms, *deadlines]))
        waits = []
        for partition, share in enumerate(queue.shares):
            replica = self._replicas.get(queue.name, partition)
            if share.next_offset >= replica.high_watermark:
                waits.append(asyncio.ensure_future(replica.wait_for_data(share.next_offset, timeout_ms)))
        if not waits:
            await asyncio.sleep(timeout_ms / 1000)
            return
        _, pending = await asyncio.wait(waits, timeout=timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _render(self, queue: Queue, partition: int, token: int, offsets: list[int],
                binary: bool, settled: list[Awaitable[None]]) -> list[dict[str, Any]]:
        """The messages of ``offsets``; what it settles on the way (messages gone or unreadable)
        is recorded, and the events' durability appended to ``settled``."""
        found, unreadable = self._records(queue, partition, offsets)
        share = queue.shares[partition]
        if unreadable:
            settled.append(self._withhold_unreadable(queue, partition, unreadable))
            offsets = [o for o in offsets if o not in unreadable]
        log_start = self._replicas.get(queue.name, partition).log.log_start_offset
        gone = [o for o in offsets if o not in found and o < log_start]
        now = self._clock_ms()
        for offset in gone:  # removed by retention before it was received: nothing to deliver
            if share.ack(offset, token, now):
                settled.append(self._record(queue, partition, ack_event([offset])))
        unread = [o for o in offsets if o not in found and o >= log_start]
        if unread:  # not expected; the lease runs out and the message is delivered again
            log.error("leased messages could not be read", extra={"fields": {
                "queue": queue.name, "partition": partition, "offsets": unread[:10]}})
        records = [found[o] for o in offsets if o in found]
        messages = [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                     "headers": r.headers} for r in records] if binary else render_records(records, force_base64=False)
        suffix = f".{token:x}"
        entries = share.entries
        for record, message in zip(records, messages, strict=True):
            entry = entries.get(record.offset)
            message["receipt"] = f"{partition}.{record.offset}{suffix}"
            message["partition"] = partition
            message["delivery_count"] = 0 if entry is None else entry.count
        return messages

    def _records(self, queue: Queue, partition: int,
                 offsets: list[int]) -> tuple[dict[int, Record], dict[int, str]]:
        """The records at ``offsets`` (sorted), from the cache or the log (missing: left out), and
        the offsets among them that lie in a stored batch whose records cannot be decoded (why)."""
        replica = self._replicas.get(queue.name, partition)
        key = (queue.meta.topic_id, partition)
        out: dict[int, Record] = {}
        unreadable: dict[int, str] = {}
        batch: DecodedBatch | None = None  # the last one used: it may be too large to be cached
        for offset in offsets:
            if batch is None or not batch.base_offset <= offset < batch.next_offset:
                batch = self.batches.find(key, offset)
            if batch is None and replica.log.log_start_offset <= offset < replica.high_watermark:
                data = self._replicas.read_plain(replica, offset, READ_BYTES, offset_max=replica.high_watermark).data
                batch = self._load(key, data, offset, offsets[-1])
            if batch is not None and offset in batch.records:
                out[offset] = batch.records[offset]
            elif batch is not None and batch.unreadable is not None and batch.base_offset <= offset < batch.next_offset:
                unreadable[offset] = batch.unreadable
        return out, unreadable

    def _withhold_unreadable(self, queue: Queue, partition: int, unreadable: dict[int, str]) -> Awaitable[None]:
        """Finish messages no delivery can carry (their stored records cannot be decoded) as
        withheld dead letters, so that the queue moves past them; the event's durability."""
        share = queue.shares[partition]
        offsets = sorted(o for o in unreadable if o in share.entries)
        if not offsets:
            return asyncio.sleep(0)
        for offset in offsets:
            share.dead_lettered(offset)
        self._on_withheld(queue.name, UNREADABLE, len(offsets))
        log.warning("skipped queue messages whose stored records cannot be decoded", extra={"fields": {
            "queue": queue.name, "partition": partition, "offsets": offsets[:10], "messages": len(offsets),
            "reason": unreadable[offsets[0]][:200]}})
        return self._record(queue, partition, dead_event(offsets, UNREADABLE))

    def _load(self, key: tuple[str, int], data: memoryview, read_from: int, last_offset: int) -> DecodedBatch | None:
        """Decode the batches of ``data`` (read from ``read_from``) up to the one holding
        ``last_offset`` (the last one asked for; at most ``BATCHES_PER_PARTITION_MAX``) into the
        cache and return the first one: the batch holding ``read_from``."""
        first = None
        for count, (position, header) in enumerate(iter_batches(data)):
            if count == BATCHES_PER_PARTITION_MAX or (first is not None and header.base_offset > last_offset):
                break
            view = data[position:position + header.size_bytes]
            if header.record_count > BATCH_RECORDS_MAX:  # stored before the bound: decode only what is asked
                return first or _part(view, max(header.base_offset, read_from), min(last_offset, header.last_offset))
            batch = self.batches.find(key, header.base_offset)
            if batch is None:
                batch = _decoded(view, header.base_offset, header.next_offset)
                self.batches.add(key, batch)
            first = first or batch
        return first

    # ---- ack, nack, dead letters -----------------------------------------------------------------

    async def ack(self, name: str, receipts: list[Receipt]) -> dict[str, Any]:
        return await self._settle(name, receipts, None)

    async def nack(self, name: str, receipts: list[Receipt], delay_ms: int) -> dict[str, Any]:
        return await self._settle(name, receipts, delay_ms)

    async def _settle(self, name: str, receipts: list[Receipt], delay_ms: int | None) -> dict[str, Any]:
        queue = self.get(name)
        now = self._clock_ms()
        done: dict[int, list[int]] = {}
        failed = []
        for receipt in receipts:
            ok = expired = False
            if receipt.partition < len(queue.shares):
                share = queue.shares[receipt.partition]
                ok = share.ack(receipt.offset, receipt.token, now) if delay_ms is None else \
                    share.nack(receipt.offset, receipt.token, now, delay_ms)
                expired = not ok and share.lease_expired(receipt.offset, receipt.token, now)
            if ok:
                done.setdefault(receipt.partition, []).append(receipt.offset)
            elif expired:
                failed.append({"receipt": str(receipt), "code": LeaseExpiredError.code,
                               "detail": "this receipt's lease ran out: the message may be leased to another "
                                         "receiver and is delivered again"})
            else:
                failed.append({"receipt": str(receipt), "code": "invalid_receipt",
                               "detail": "no current lease has this receipt: the message was delivered again, "
                                         "it was already settled, or it is not a receipt of this queue"})
        durable = []
        for partition, offsets in done.items():
            event = ack_event(offsets) if delay_ms is None else nack_event(now + delay_ms if delay_ms else 0, offsets)
            durable.append(self._record(queue, partition, event))
        await asyncio.gather(*durable)
        if delay_ms is not None:
            for partition in done:
                await self._dead_letter(queue, partition)
        settled = sum(map(len, done.values()))
        if not settled and any(f["code"] == LeaseExpiredError.code for f in failed):
            raise LeaseExpiredError("nothing was settled: every lease of these receipts ran out or is gone "
                                    "(the messages are delivered again)", failed=failed)
        return {"acked" if delay_ms is None else "nacked": settled, "failed": failed}

    async def _dead_letter(self, queue: Queue, partition: int) -> None:
        share = queue.shares[partition]
        offsets = share.take_dead()
        if not offsets:
            return
        found, unreadable = self._records(queue, partition, offsets)
        if unreadable:
            await self._withhold_unreadable(queue, partition, unreadable)
            offsets = [o for o in offsets if o not in unreadable]
        log_start = self._replicas.get(queue.name, partition).log.log_start_offset
        unread = [o for o in offsets if o not in found and o >= log_start]
        if unread:  # not expected: keep them for the next sweep rather than drop them
            share.requeue_dead(unread)
            offsets = [o for o in offsets if o not in unread]
        records = [IncomingRecord(ProducerRecord(r.value, r.key,
                                                 [*_client_headers(r), *self._origin(queue, partition, r)],
                                                 r.timestamp), None) for r in (found[o] for o in offsets if o in found)]
        if not offsets:
            return
        withheld = None
        try:
            if records:
                await self._produce(queue.name, queue.dead_letter_topic, queue.dead_letter_id, records)
        except DeadLetterRefusedError as exc:
            withheld = exc.reason
            self._on_withheld(queue.name, exc.reason, len(offsets))
            log.warning("dead letters withheld: they stay dead in the queue's state log", extra={"fields": {
                "queue": queue.name, "dead_letter_topic": queue.dead_letter_topic, "reason": exc.reason,
                "detail": str(exc), "messages": len(offsets)}})
        except (BrokerError, StorageError, CoordinatorError) as exc:
            share.requeue_dead(offsets)
            queue.dead_letter_retry_at = time.monotonic() + DEAD_LETTER_RETRY_S
            log.error("dead-lettering failed; retrying later", extra={"fields": {
                "queue": queue.name, "dead_letter_topic": queue.dead_letter_topic, "error": str(exc),
                "retry_in_s": DEAD_LETTER_RETRY_S}})
            return
        for offset in offsets:
            share.dead_lettered(offset)
        await self._record(queue, partition, dead_event(offsets, withheld))

    def _origin(self, queue: Queue, partition: int, record: Record) -> list[tuple[str, bytes]]:
        entry = queue.shares[partition].entries.get(record.offset)
        return [("x-logbroker-queue", queue.name.encode()), ("x-logbroker-partition", str(partition).encode()),
                ("x-logbroker-offset", str(record.offset).encode()),
                ("x-logbroker-delivery-count", str(0 if entry is None else entry.count).encode())]

    async def sweep(self) -> None:
        """Expire due leases and delays; copy messages out of deliveries to the dead-letter topics."""
        now = self._clock_ms()
        for queue in list(self._queues.values()):
            for partition, share in enumerate(queue.shares):
                share.expire(now)
                if time.monotonic() >= queue.dead_letter_retry_at:
                    await self._dead_letter(queue, partition)

    def describe(self, name: str) -> dict[str, Any]:
        queue = self.get(name)
        partitions = []
        for partition, share in enumerate(queue.shares):
            hwm = self._replicas.get(name, partition).high_watermark
            partitions.append({"partition": partition, "done_below": share.done_below,
                               "next_offset": share.next_offset, "in_flight": share.in_flight(),
                               "not_yet_delivered": max(0, hwm - share.next_offset)})
        return {"queue": name, "max_deliveries": queue.max_deliveries,
                "dead_letter_topic": queue.dead_letter_topic, "dead_letter_topic_id": queue.dead_letter_id,
                "visibility_timeout_ms": queue.visibility_ms,
                "partitions": partitions}


def _let_run(awaitables: list[Awaitable[None]]) -> None:
    """Let durability waits nobody will await finish on their own, their errors retrieved."""
    for awaitable in awaitables:
        asyncio.ensure_future(awaitable).add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("a queue state event did not become durable", extra={"fields": {"error": str(task.exception())}})


def _client_headers(record: Record) -> list[tuple[str, bytes]]:
    """``record``'s headers without any that claim to be the broker's (a record stored before they
    were refused at produce, decision 0173): a dead letter's origin headers are the broker's alone."""
    return [(name, value) for name, value in record.headers if not is_reserved_header(name)]


def _decoded(view: memoryview, base_offset: int, next_offset: int) -> DecodedBatch:
    """A stored batch's records; when they cannot all be decoded, those before the first bad one
    and the reason for the rest."""
    try:
        return decoded(base_offset, next_offset, decode_records(view))
    except InvalidBatchError as exc:
        reason = str(exc)
    records: list[Record] = []
    with contextlib.suppress(InvalidBatchError):
        records.extend(iter_records(view))
    return decoded(base_offset, next_offset, records, unreadable=reason)


def _part(view: memoryview, first: int, last: int) -> DecodedBatch:
    """Records ``first`` to ``last`` (both in the batch) of a batch of more records than one batch
    may now hold (not cached: the next call asks for other offsets; what it costs is skipping to
    ``first``)."""
    records: list[Record] = []
    try:
        records.extend(itertools.takewhile(lambda r: r.offset <= last, iter_records(view, from_offset=first)))
    except InvalidBatchError as exc:
        return decoded(first, last + 1, records, unreadable=str(exc))
    return decoded(first, last + 1, records)
