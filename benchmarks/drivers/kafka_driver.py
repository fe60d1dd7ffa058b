"""LogBroker through its Kafka listener, driven by librdkafka (confluent-kafka) with the settings
``benchmarks/kafka_bench.py`` measured best (``benchmarks.kafka_settings``): the producer hands
librdkafka ``BATCH`` records per ``produce_batch`` and librdkafka batches them as it likes
(``linger.ms`` 5, acks=1); the consumer reads lists of up to ``BATCH`` (``consume``) and touches
every value; the tail reader long-polls (``fetch.wait.max.ms`` 500) and takes each record as
``poll`` hands it over; paced sends and one-at-a-time publishes go through a producer lingering
1 ms (a one-at-a-time publish is flushed, which sends it at once).

librdkafka's calls that wait (``flush``, ``consume``, ``poll`` with a timeout, ``close``, the
admin client's futures) run in threads, where librdkafka releases the GIL, so the event loop (the
paced sender's ticker) never blocks on them; each such call in a thread waits at most ``POLL_S``
before it looks at its deadline again. ``produce`` only queues, and ``poll(0)`` serves delivery
reports without waiting.

The idle point's consumers are aiokafka's (asyncio, no thread of their own): a process can hold
at most about a thousand confluent-kafka clients (each takes a thread-local storage key, and
glibc has 1,024), and the point holds 2,000. Each has its own connections and long-polls the
leader as a librdkafka consumer would, so the node holds the same load.

fsync'd variant: the topic is made with LogBroker's own config ``flush=always`` (CreateTopics takes
it) and written acks=all, as the ``logbroker`` driver does over HTTP. No queues: Kafka has none
with per-message acks (LogBroker's are served over HTTP and gRPC).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports (mypy sees no export there)

from benchmarks.drivers.base import OP_TIMEOUT_S, Driver, latency_ms
from benchmarks.kafka_settings import (
    ADMIN,
    FETCH_BYTES,
    FETCH_QUEUE_BACKOFF_MS,
    LATENCY_FETCH_WAIT_MS,
    LATENCY_LINGER_MS,
    PASSWORD,
    QUEUE_MESSAGES_MAX,
    THROUGHPUT_LINGER_MS,
    client_config,
    consumer_config,
    producer_config,
)

BATCH: Final = 1_000
POLL_S: Final = 0.1              # the longest one waiting librdkafka call blocks before its deadline is checked
IDLE_FETCH_WAIT_MS: Final = 10_000
IDLE_OPENING_MAX: Final = 32     # idle consumers opened and closed at once
WARM_UP_LOG: Final = "b-kafka-warm-up"
# The producers: (acks, linger.ms) by use.
PRODUCERS: Final = {"throughput": ("1", THROUGHPUT_LINGER_MS), "fsync": ("all", THROUGHPUT_LINGER_MS),
                    "latency": ("1", LATENCY_LINGER_MS)}


class KafkaDriver(Driver):
    system = "logbroker-kafka"
    fsync_unsupported = None

    def __init__(self, endpoint: Any) -> None:
        super().__init__(endpoint)
        self._admin: AdminClient | None = None
        self._producers: dict[str, Producer] = {}
        self._groups = itertools.count()
        self._paced_failed: list[KafkaError] = []

    @property
    def address(self) -> str:
        return f"{self.endpoint.host}:{self.endpoint.port}"

    async def connect(self) -> None:
        self._admin = AdminClient(client_config(self.address))

    async def close(self) -> None:
        await self.settle()
        producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            await asyncio.to_thread(producer.flush, OP_TIMEOUT_S)

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        import confluent_kafka

        return {
            "client": f"confluent-kafka {version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]}), "
                      "SASL PLAIN as the admin user (the node's auth is off, as the logbroker system's: the "
                      "login is accepted unchecked); blocking calls in threads beside uvloop",
            "partitions": 1,
            "durability": "flush=interval (fsync every 1000 ms), acks=1 (leader append); "
                          "fsync variant: topic config flush=always (group commit, fsync before the ack), acks=all",
            "produce": f"produce_batch of {BATCH} records, linger.ms {THROUGHPUT_LINGER_MS}, "
                       f"queue.buffering.max.messages {QUEUE_MESSAGES_MAX:,}, acks=1, every delivery report served",
            "consume": f"a new consumer assigned at offset 0, consume({BATCH}) lists, fetch.max.bytes "
                       f"{FETCH_BYTES >> 20} MiB, fetch.queue.backoff.ms {FETCH_QUEUE_BACKOFF_MS}, every value touched",
            "publish": f"produce one record and flush (linger.ms {LATENCY_LINGER_MS}: the flush sends it at once), "
                       "acks=1, before the next",
            "tail": f"a consumer assigned at the high watermark, poll() per record, fetch.wait.max.ms "
                    f"{LATENCY_FETCH_WAIT_MS}, fetch.queue.backoff.ms {FETCH_QUEUE_BACKOFF_MS}; paced sends: "
                    "produce per record, "
                    f"linger.ms {LATENCY_LINGER_MS}, acks=1",
            "idle": f"one aiokafka {version('aiokafka')} consumer (its own connections) per consumer, assigned "
                    f"at the high watermark, long-poll fetches of fetch_max_wait_ms {IDLE_FETCH_WAIT_MS} (librdkafka "
                    "holds at most ~1,000 clients per process)",
        }

    @property
    def admin(self) -> AdminClient:
        assert self._admin is not None, "connect() first"
        return self._admin

    async def _create_topic(self, name: str, config: dict[str, str]) -> None:
        """One partition, one replica; a topic that exists already is taken as it is."""
        (future,) = self.admin.create_topics([NewTopic(name, 1, 1, config=config)],
                                             request_timeout=OP_TIMEOUT_S).values()
        try:
            async with asyncio.timeout(OP_TIMEOUT_S):
                await asyncio.wrap_future(future)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    async def create_log(self, name: str, *, fsync: bool = False) -> None:
        """The topic, and its leader known to the producer that ``produce`` will write it with
        (a metadata round trip fewer in the timed section)."""
        await self._create_topic(name, {"flush": "always" if fsync else "interval"})
        await self._warm_producers()
        await asyncio.to_thread(self._producer("fsync" if fsync else "throughput").list_topics, name, OP_TIMEOUT_S)

    async def _warm_producers(self) -> None:
        """Make the producers once, each logged in and connected to the leader by a record sent to
        ``WARM_UP_LOG``, so that no timed section pays for it."""
        if self._producers:
            return
        await self._create_topic(WARM_UP_LOG, {})
        for use, (acks, linger_ms) in PRODUCERS.items():
            producer = Producer(producer_config(self.address, acks=acks, linger_ms=linger_ms))
            producer.produce(WARM_UP_LOG, b"warm-up", partition=0)
            if await asyncio.to_thread(producer.flush, OP_TIMEOUT_S):
                raise TimeoutError(f"the {use} producer's warm-up record was not acknowledged")
            self._producers[use] = producer

    def _producer(self, use: str) -> Producer:
        assert self._producers, "create_log() first: it makes the producers"
        return self._producers[use]

    async def produce(self, log: str, payload: bytes, count: int, *, fsync: bool = False) -> int:
        producer = self._producer("fsync" if fsync else "throughput")
        return await asyncio.to_thread(_produce_all, producer, log, payload, count, time.monotonic() + OP_TIMEOUT_S)

    async def consume(self, log: str, count: int) -> int:
        consumer = Consumer(consumer_config(self.address, f"b-consume-{next(self._groups)}"))
        consumer.assign([TopicPartition(log, 0, 0)])
        self.defer(asyncio.to_thread(consumer.close))
        return await asyncio.to_thread(_read, consumer, count, time.monotonic() + OP_TIMEOUT_S)

    async def prepare_sends(self, log: str) -> None:
        """The latency producer learns the log's leader before the sends are timed."""
        await asyncio.to_thread(self._producer("latency").list_topics, log, OP_TIMEOUT_S)

    async def publish_one(self, log: str, payload: bytes) -> None:
        failed: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failed.append(err)

        producer = self._producer("latency")
        producer.produce(log, payload, partition=0, on_delivery=delivered)
        if await asyncio.to_thread(producer.flush, OP_TIMEOUT_S) or failed:
            raise RuntimeError(f"a publish to {log} was not acknowledged: {failed[:1]}")

    async def send_now(self, log: str, payloads: list[bytes]) -> None:
        producer = self._producer("latency")
        deadline = time.monotonic() + OP_TIMEOUT_S
        for payload in payloads:
            while True:
                try:
                    producer.produce(log, payload, partition=0, on_delivery=self._paced_delivered)
                    break
                except BufferError:  # the local queue is full: wait for room, to the deadline
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.to_thread(producer.poll, POLL_S)
        producer.poll(0)

    def _paced_delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self._paced_failed.append(err)

    async def flush_sends(self) -> None:
        left = await asyncio.to_thread(self._producer("latency").flush, OP_TIMEOUT_S)
        failed, self._paced_failed = self._paced_failed, []
        if left or failed:
            raise RuntimeError(f"{left} paced sends unacknowledged, {len(failed)} failed: {failed[:3]}")

    def _tail_consumer(self, log: str, **extra: Any) -> Consumer:
        """A consumer of ``log`` assigned at its high watermark, once connected to the leader (the
        watermark is asked of it): from then on it waits in the leader's long-poll fetches."""
        consumer = Consumer(consumer_config(self.address, f"b-tail-{next(self._groups)}", **extra))
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(log, 0), timeout=OP_TIMEOUT_S, cached=False)
            consumer.assign([TopicPartition(log, 0, high)])
        except BaseException:
            consumer.close()
            raise
        return consumer

    async def receive_latencies(self, log: str, count: int, ready: Callable[[], None],
                                deadline_s: float) -> list[float]:
        consumer = await asyncio.to_thread(self._tail_consumer, log, **{"fetch.wait.max.ms": LATENCY_FETCH_WAIT_MS})
        try:
            ready()
            return await asyncio.to_thread(_follow, consumer, count, deadline_s)
        finally:
            await asyncio.to_thread(consumer.close)

    async def hold_idle(self, log: str, consumers: int, ready: Callable[[], None], stop: asyncio.Event) -> int:
        """``consumers`` aiokafka consumers, opened ``IDLE_OPENING_MAX`` at a time, each assigned at
        the high watermark once it asked the leader for it; their fetchers then long-poll in the
        background while the log stays empty."""
        held: list[AIOKafkaConsumer] = []
        slots = asyncio.Semaphore(IDLE_OPENING_MAX)
        # A warning per connection that SASL PLAIN goes without TLS: the benchmark's loopback node.
        conn_log = logging.getLogger("aiokafka.conn")
        level = conn_log.level
        conn_log.setLevel(logging.ERROR)

        async def open_one() -> None:
            async with slots:
                consumer = self._idle_consumer()
                held.append(consumer)  # before it starts: one cancelled while starting is stopped too
                await consumer.start()
                partition = AioTopicPartition(log, 0)
                consumer.assign([partition])
                await consumer.seek_to_end(partition)
                await consumer.position(partition)  # the leader answered: from here it long-polls

        async def close_one(consumer: AIOKafkaConsumer) -> None:
            async with slots:
                await consumer.stop()

        try:
            async with asyncio.timeout(OP_TIMEOUT_S), asyncio.TaskGroup() as opening:
                for _ in range(consumers):
                    opening.create_task(open_one())
            ready()
            await stop.wait()
        finally:
            try:
                async with asyncio.timeout(OP_TIMEOUT_S), asyncio.TaskGroup() as closing:
                    for consumer in held:
                        closing.create_task(close_one(consumer))
            finally:
                conn_log.setLevel(level)
        return len(held)

    def _idle_consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(bootstrap_servers=self.address, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username=ADMIN, sasl_plain_password=PASSWORD,
                                group_id=None, enable_auto_commit=False, fetch_max_wait_ms=IDLE_FETCH_WAIT_MS,
                                request_timeout_ms=IDLE_FETCH_WAIT_MS + 30_000)

    async def queue_unavailable(self) -> str | None:
        return ("not available: Kafka has no queues with per-message acks (LogBroker's queues are served "
                "over HTTP and gRPC)")

    async def create_queue(self, name: str) -> None:
        raise NotImplementedError(await self.queue_unavailable())

    async def queue_send(self, name: str, payload: bytes, count: int) -> int:
        raise NotImplementedError(await self.queue_unavailable())

    async def queue_receive_ack(self, name: str, count: int) -> int:
        raise NotImplementedError(await self.queue_unavailable())


def _produce_all(producer: Producer, log: str, payload: bytes, count: int, deadline: float) -> int:
    """In a thread: ``count`` records in lists of ``BATCH`` (what a full local queue refuses is
    offered again once ``poll`` made room), then every delivery report; the records acknowledged."""
    acked = 0

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    queued = 0
    while queued < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{queued} of {count} records queued by the deadline")
        messages = [{"value": payload} for _ in range(min(BATCH, count - queued))]
        producer.produce_batch(log, messages, partition=0, on_delivery=delivered)
        refused = sum(1 for message in messages if "_error" in message)
        queued += len(messages) - refused
        producer.poll(POLL_S if refused else 0)
    producer.flush(max(0.0, deadline - time.monotonic()))
    return acked


def _read(consumer: Consumer, count: int, deadline: float) -> int:
    """In a thread: records from ``consumer`` until ``count`` or the deadline, every value touched."""
    got = 0
    while got < count and time.monotonic() < deadline:
        for message in consumer.consume(min(BATCH, count - got), timeout=POLL_S):
            if message.error() is not None:
                raise KafkaException(message.error())
            _ = message.value()
            got += 1
    return got


def _follow(consumer: Consumer, count: int, deadline_s: float) -> list[float]:
    """In a thread: the latency of each record ``poll`` hands over, until ``count`` or the deadline."""
    latencies: list[float] = []
    while len(latencies) < count and (left := deadline_s - time.monotonic()) > 0:
        message = consumer.poll(min(POLL_S, left))
        if message is None:
            continue
        now = time.time_ns()
        if message.error() is not None:
            raise KafkaException(message.error())
        latencies.append(latency_ms(message.value() or b"", now))
    return latencies
