"""``Producer``: batches records per partition and sends each batch prebuilt.

The producer builds binary batches itself (``segments.batch``) and sends each as one prebuilt
batch, so the broker only validates and appends. Keyed records go to the partition the broker
would choose for them (``logbroker.client.partitioning``); keyless ones stick to one partition per
batch, round-robin. Every buffer and retry is bounded (see the constructor limits).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Sequence
from typing import Any, Final

from logbroker.client.core import Client
from logbroker.client.errors import LogBrokerError
from logbroker.client.partitioning import DEFAULT_KEY_HASH, KEY_HASH_KEY, key_partition
from logbroker.client.routing import RetryPolicy, backoff_s, idempotent_resend, produce_refused
from segments.batch import BATCH_RECORDS_MAX, NO_PRODUCER_ID, NO_SEQUENCE, ProducerRecord, encode_batch

PRODUCE_BACKOFF_MAX_S: Final = 5.0
HEDGE_AFTER_S: Final = 0.25  # an idempotent batch unanswered this long looks for a new leader (decision 0386)
COPIES_MAX: Final = 3  # copies of one batch in flight at once (the first and two sent to new leaders)
SEQUENCE_WRAP: Final = 2**31  # base_sequence is an i32


@dataclasses.dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int


@dataclasses.dataclass
class _Pending:
    records: list[ProducerRecord] = dataclasses.field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = dataclasses.field(default_factory=list)
    size_bytes: int = 0
    timer: asyncio.TimerHandle | None = None


class Producer:
    """Batches records per partition (``linger_ms``, ``batch_bytes``, at most ``BATCH_RECORDS_MAX``
    records: what the broker takes in one batch) and sends prebuilt batches.

    ``send`` returns a future per record; ``buffer_bytes_max`` bounds what may wait unsent (send
    waits for room), ``in_flight_max`` bounds concurrent requests.

    Idempotence (``idempotent=True``, the default): before its first batch the producer asks the
    broker for an identity (``POST /v1/producers``: an id bound to the client's user, and an
    epoch) and numbers each partition's records; every batch carries its id, epoch and the
    sequence of its first record, and the broker stores a batch it has seen within the topic's
    ``dedup_window_ms`` only once (answering the first offsets), also after a leader failover.

    Retries: a batch goes to its partition's leader; the ``Client`` sends it again, after reading
    the cluster metadata again, when a node says it appended nothing (503 ``not_leader``,
    ``no_leader``, ``not_enough_replicas``, ``coordinator_unavailable``) or no connection could be
    made (``Client.retry`` bounds those tries); the producer itself sends it again, at most
    ``retries`` times with backoff (``retry_backoff_ms`` doubling, or the node's ``Retry-After``),
    when a node refused it before appending (429 quota, 503 ``too_many_connections``) and, when
    idempotent, also when the outcome is unknown (no answer after sending, 504
    ``forward_outcome_unknown`` or ``replication_timeout``, a leader change while it waited).
    An idempotent batch still unanswered after ``HEDGE_AFTER_S`` has the metadata read again,
    each period, asking the nodes it was sent to last: when it names another leader (the one
    asked may be paused or cut off, and waits out the call's timeout), a copy goes there as well,
    and the first success answers (the broker stores the batch once). Not
    idempotent, a batch whose request was sent and then timed out or lost its connection is never
    sent again: it may have been stored and a resend could store it twice; its futures fail with
    the error (status 0) and the caller decides.

    Order: records sent to one partition are stored in the order ``send`` was called. A
    partition has at most one batch in flight (its next batch waits for the answer, FIFO), so
    two requests on two connections can never overtake each other; partitions go in parallel."""

    def __init__(self, client: Client, *, linger_ms: int = 5, batch_bytes: int = 1 << 20, acks: str = "1",
                 retries: int = 5, retry_backoff_ms: int = 100, buffer_bytes_max: int = 64 << 20,
                 in_flight_max: int = 8, idempotent: bool = True) -> None:
        self.client = client
        self.idempotent = idempotent
        self.producer_id, self.producer_epoch = NO_PRODUCER_ID, -1  # issued by the broker before the first batch
        self._identity_lock = asyncio.Lock()
        self._sequences: dict[tuple[str, int], int] = {}  # the next record's sequence, per partition
        self.linger_ms, self.batch_bytes, self.acks = linger_ms, batch_bytes, acks
        self.retries, self.retry_backoff_ms = retries, retry_backoff_ms
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._partitions: dict[str, int] = {}
        self._key_hash: dict[str, str] = {}  # each topic's key_hash, read with its partition count
        self._sticky: dict[str, int] = {}
        self._in_flight = asyncio.Semaphore(in_flight_max)
        self._in_order: dict[tuple[str, int], asyncio.Lock] = {}  # one per partition written to
        self._tasks: set[asyncio.Task[None]] = set()
        self._buffered = 0
        self._buffer_max = buffer_bytes_max
        self._room = asyncio.Condition()

    async def partitions_for(self, topic: str) -> int:
        if topic not in self._partitions:
            described = await self.client.describe_topic(topic, offsets=False)
            self._key_hash[topic] = str(described.get("config", {}).get(KEY_HASH_KEY, DEFAULT_KEY_HASH))
            self._partitions[topic] = int(described["partition_count"])
        return self._partitions[topic]

    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes]] = (), partition: int | None = None,
                   timestamp: int | None = None) -> asyncio.Future[RecordMetadata]:
        count = await self.partitions_for(topic)
        if partition is None:
            partition = key_partition(key, count, self._key_hash.get(topic, DEFAULT_KEY_HASH)) if key is not None \
                else self._sticky.setdefault(topic, 0) % count
        size = len(value or b"") + len(key or b"") + sum(len(n) + len(v) for n, v in headers) + 16
        async with self._room:
            await self._room.wait_for(lambda: self._buffered + size <= self._buffer_max or self._buffered == 0)
            self._buffered += size
        pending = self._pending.setdefault((topic, partition), _Pending())
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        pending.records.append(ProducerRecord(value, key, tuple(headers), timestamp))
        pending.futures.append(future)
        pending.size_bytes += size
        if pending.size_bytes >= self.batch_bytes or len(pending.records) >= BATCH_RECORDS_MAX:
            self._ship(topic, partition)
        elif pending.timer is None:
            pending.timer = asyncio.get_running_loop().call_later(self.linger_ms / 1000, self._ship, topic, partition)
        return future

    async def send_and_wait(self, topic: str, value: bytes | None, **kwargs: Any) -> RecordMetadata:
        return await (await self.send(topic, value, **kwargs))

    def _ship(self, topic: str, partition: int) -> None:
        pending = self._pending.pop((topic, partition), None)
        if pending is None or not pending.records:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        if partition == self._sticky.get(topic, -1) % max(1, self._partitions.get(topic, 1)):
            self._sticky[topic] = self._sticky.get(topic, 0) + 1
        sequence = NO_SEQUENCE
        if self.idempotent:  # numbered here, in the order batches leave the buffer
            sequence = self._sequences.get((topic, partition), 0)
            self._sequences[(topic, partition)] = (sequence + len(pending.records)) % SEQUENCE_WRAP
        task = asyncio.get_running_loop().create_task(self._send_batch(topic, partition, pending, sequence))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _identity(self) -> None:
        async with self._identity_lock:
            if self.producer_id == NO_PRODUCER_ID:
                self.producer_id, self.producer_epoch = await self.client.init_producer()

    async def _send_batch(self, topic: str, partition: int, pending: _Pending, sequence: int) -> None:
        in_order = self._in_order.setdefault((topic, partition), asyncio.Lock())
        try:
            if self.idempotent:
                await self._identity()
            batch = encode_batch(pending.records, producer_id=self.producer_id,
                                 producer_epoch=self.producer_epoch, base_sequence=sequence)
            async with in_order, self._in_flight:
                base = await self._with_retries(topic, partition, batch)
            for i, future in enumerate(pending.futures):
                if not future.done():
                    future.set_result(RecordMetadata(topic, partition, base + i))
        except LogBrokerError as exc:
            for future in pending.futures:
                if not future.done():
                    future.set_exception(exc)
        finally:
            async with self._room:
                self._buffered -= pending.size_bytes
                self._room.notify_all()

    async def _with_retries(self, topic: str, partition: int, batch: bytes) -> int:
        """Send the batch; again only after a refusal (``routing.produce_refused``). The caller
        holds the partition's order lock, so no later batch of it overtakes a retried one."""
        policy = RetryPolicy(self.retries + 1, self.retry_backoff_ms / 1000,
                             max(self.retry_backoff_ms / 1000, PRODUCE_BACKOFF_MAX_S), PRODUCE_BACKOFF_MAX_S)
        for attempt in range(self.retries + 1):
            try:
                if self.idempotent and self.acks != "0":
                    return await self._hedged(topic, partition, batch)
                return await self.client.produce_batch(topic, partition, batch, acks=self.acks)
            except LogBrokerError as exc:
                again = idempotent_resend(exc) if self.idempotent else produce_refused(exc)
                if not again or attempt == self.retries:
                    raise
                await asyncio.sleep(backoff_s(attempt, policy, exc.retry_after_s, random.random()))
        raise AssertionError("unreachable")

    async def _hedged(self, topic: str, partition: int, batch: bytes) -> int:
        """Send the batch; each ``HEDGE_AFTER_S`` without an answer, read the leaders again and,
        when another leader is named, send a copy there too (at most ``COPIES_MAX`` in flight).
        The first success answers and the other copies are given up; when every copy failed, the
        last error is raised."""
        sent_to = {await self.client.target_url(topic, partition)}
        copies = {asyncio.ensure_future(self.client.produce_batch(topic, partition, batch, acks=self.acks))}
        failure: LogBrokerError | None = None
        try:
            while copies:
                done, _ = await asyncio.wait(copies, timeout=HEDGE_AFTER_S, return_when=asyncio.FIRST_COMPLETED)
                for copy in done:
                    copies.discard(copy)
                    error = copy.exception()
                    if error is None:
                        return copy.result()
                    if not isinstance(error, LogBrokerError):
                        raise error
                    failure = error
                if done or len(copies) >= COPIES_MAX:
                    continue
                self.client.mark_silent(sent_to)  # the metadata read asks the others first
                leader = await self.client.leader_url(topic, partition, refresh=True)
                if leader is not None and leader not in sent_to:
                    sent_to.add(leader)
                    copies.add(asyncio.ensure_future(self.client.produce_batch(topic, partition, batch,
                                                                               acks=self.acks)))
        finally:
            for copy in copies:
                copy.cancel()
            if copies:
                await asyncio.wait(copies)
        assert failure is not None
        raise failure

    async def flush(self) -> None:
        """Send everything buffered and wait for every answer."""
        for topic, partition in list(self._pending):
            self._ship(topic, partition)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

