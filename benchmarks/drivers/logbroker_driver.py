"""LogBroker through its own client, ``logbroker.client.Client``, driven the fastest way known
(as ``benchmarks/node_bench.py`` does): the client builds binary batches of ``BATCH_RECORDS``
records and posts each as one prebuilt batch with ``IN_FLIGHT`` requests pipelined; the consumer
is the client's ``Consumer`` reading columns (``poll_batches``): it fetches raw batches (sent by the
node with ``sendfile``), verifies every checksum and decodes every record, with the next fetch
already in flight while the current one is decoded, and the benchmark touches every value. The
tail reader of the latency scenario follows the partition's subscribe stream (stored batches
pushed over a WebSocket, decision 0379), as NATS and RabbitMQ stream consumers are pushed to,
rather than paying a request per delivery. Its paced
sender writes each tick's batch to a produce stream (one WebSocket, decisions 0254 and 0296), as
NATS and RabbitMQ publishers write to their one connection, rather than paying a request per batch.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Callable
from typing import Any, Final

import aiohttp

from benchmarks.drivers.base import OP_TIMEOUT_S, Driver, latency_ms
from logbroker.client import Client, Consumer, ProduceStream, QueueConsumer
from segments.batch import encode_values

BATCH_RECORDS: Final = 1000
IN_FLIGHT: Final = 4
FETCH_BYTES: Final = 4 << 20
IDLE_WAIT_MS: Final = 10_000
QUEUE_RECEIVE_MAX: Final = 1000
QUEUE_RECEIVERS: Final = 4
QUEUE_VISIBILITY_MS: Final = 60_000
QUEUE_WAIT_MS: Final = 100
QUEUE_RECEIVE_PATH: Final = re.compile(r"^/v1/queues/\{[^}/]+\}/receive$")


class LogBrokerDriver(Driver):
    system = "logbroker"
    fsync_unsupported = None

    def __init__(self, endpoint: Any) -> None:
        super().__init__(endpoint)
        self._client: Client | None = None
        self._streams: dict[str, ProduceStream] = {}
        self._sent: list[asyncio.Future[int]] = []

    @property
    def client(self) -> Client:
        assert self._client is not None, "connect() first"
        return self._client

    async def connect(self) -> None:
        self._client = Client(self.endpoint.url, timeout_s=OP_TIMEOUT_S)

    async def close(self) -> None:
        await self.settle()
        if self._client is not None:
            await self._client.close()

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "client": f"logbroker.client {version('logbroker')} (aiohttp, uvloop)",
            "partitions": 1,
            "durability": "flush=interval (fsync every 1000 ms), acks=1 (leader append); "
                          "fsync variant: flush=always (group commit, fsync before the ack), acks=all",
            "produce": f"prebuilt batches of {BATCH_RECORDS} records, {IN_FLIGHT} requests in flight",
            "consume": f"Consumer.poll_batches (raw-batch fetch, max_bytes {FETCH_BYTES}, one fetch ahead, "
                       "checksums verified, every record decoded into columns, every value touched)",
            "publish": "one record per JSON produce (value_b64), acks=1, awaited before the next",
            "tail": "subscribe stream (Client.subscribe, a WebSocket), the stored batches pushed as they are "
                    "appended; paced sends as one prebuilt batch per tick on a produce stream "
                    f"(Client.produce_stream, a WebSocket, acks=1, {IN_FLIGHT} in flight: while they are, "
                    "the next tick's batch takes what is due meanwhile)",
            "idle": f"one HTTP connection per consumer, long-poll fetch wait_ms {IDLE_WAIT_MS}",
            "queue": f"queue of 1 partition filled like produce; {QUEUE_RECEIVERS} QueueConsumers (msgpack), "
                     f"max_messages {QUEUE_RECEIVE_MAX}, wait_ms {QUEUE_WAIT_MS}, one ack call per receive",
        }

    async def create_log(self, name: str, *, fsync: bool = False) -> None:
        await self.client.create_topic(name, partitions=1, config={"flush": "always" if fsync else "interval"})

    async def produce(self, log: str, payload: bytes, count: int, *, fsync: bool = False) -> int:
        acks = "all" if fsync else "1"
        sizes = [BATCH_RECORDS] * (count // BATCH_RECORDS) + ([count % BATCH_RECORDS] if count % BATCH_RECORDS else [])
        work: asyncio.Queue[int | None] = asyncio.Queue(maxsize=IN_FLIGHT * 2)
        done = 0

        async def sender() -> None:
            nonlocal done
            while (n := await work.get()) is not None:
                await self.client.produce_batch(log, 0, encode_values([payload] * n), acks=acks)
                done += n

        workers = [asyncio.create_task(sender()) for _ in range(IN_FLIGHT)]
        try:
            async with asyncio.timeout(OP_TIMEOUT_S):
                for n in sizes:
                    await work.put(n)
                for _ in workers:
                    await work.put(None)
                await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
        return done

    async def consume(self, log: str, count: int) -> int:
        consumer = Consumer(self.client, max_bytes=FETCH_BYTES, wait_ms=0)
        consumer.assign([(log, 0)])
        consumer.seek(log, 0, 0)
        got = 0
        try:
            async with asyncio.timeout(OP_TIMEOUT_S):
                while got < count:
                    batches = await consumer.poll_batches()
                    if not batches:
                        raise RuntimeError(f"log {log} ended at {got} records, {count} expected")
                    for batch in batches:
                        for value in batch.values:
                            _ = value
                        got += len(batch)
        finally:
            await consumer.close()
        return got

    async def publish_one(self, log: str, payload: bytes) -> None:
        await self.client.produce(log, [{"value_b64": base64.b64encode(payload).decode(), "partition": 0}], acks="1")

    async def prepare_sends(self, log: str) -> None:
        if log not in self._streams:
            self._streams[log] = await self.client.produce_stream(log, 0, acks="1", in_flight_max=IN_FLIGHT)

    async def send_now(self, log: str, payloads: list[bytes]) -> None:
        await self.prepare_sends(log)
        self._sent.append(await self._streams[log].send(encode_values(payloads)))

    async def flush_sends(self) -> None:
        async with asyncio.timeout(OP_TIMEOUT_S):
            sent, self._sent = self._sent, []
            await asyncio.gather(*sent)
            streams, self._streams = list(self._streams.values()), {}
            for stream in streams:
                await stream.close()

    async def receive_latencies(self, log: str, count: int, ready: Callable[[], None],
                                deadline_s: float) -> list[float]:
        latencies: list[float] = []
        subscription = await self.client.subscribe(log, 0)
        try:
            async with asyncio.timeout(max(0.0, deadline_s - time.monotonic())):
                ready()
                async for batch in subscription:
                    now = time.time_ns()
                    for value in batch.values:
                        latencies.append(latency_ms(value or b"", now))
                    if len(latencies) >= count:
                        break
        except TimeoutError:
            pass
        finally:
            await subscription.close()
        return latencies

    async def hold_idle(self, log: str, consumers: int, ready: Callable[[], None], stop: asyncio.Event) -> int:
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=OP_TIMEOUT_S),
                                        connector=aiohttp.TCPConnector(limit=consumers + 1))
        client = Client(self.endpoint.url, session=session)
        waiting = 0
        all_waiting = asyncio.Event()

        async def one() -> None:
            nonlocal waiting
            # A first fetch that does not wait opens this consumer's connection; every fetch after
            # it goes out on that warm connection at once and waits at the node.
            await client.fetch_batches(log, 0, 0, wait_ms=0)
            waiting += 1
            if waiting == consumers:
                all_waiting.set()
            while not stop.is_set():
                await client.fetch_batches(log, 0, 0, wait_ms=IDLE_WAIT_MS)

        tasks = [asyncio.create_task(one()) for _ in range(consumers)]
        try:
            async with asyncio.timeout(OP_TIMEOUT_S):
                await all_waiting.wait()
            ready()
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await session.close()
        return waiting

    async def queue_unavailable(self) -> str | None:
        _status, _headers, body = await self.client.request("GET", "/v1/openapi.json")
        paths = json.loads(body).get("paths", {})
        if any(QUEUE_RECEIVE_PATH.match(p) and "post" in ops for p, ops in paths.items()):
            return None
        return "not available: this node has no POST /v1/queues/{name}/receive (queues with acks are not built yet)"

    async def create_queue(self, name: str) -> None:
        await self.client.create_topic(name, partitions=1, kind="queue")

    async def queue_send(self, name: str, payload: bytes, count: int) -> int:
        """A queue is a log: filled with prebuilt batches, pipelined, like ``produce``."""
        return await self.produce(name, payload, count)

    async def queue_receive_ack(self, name: str, count: int) -> int:
        """``QUEUE_RECEIVERS`` competing ``QueueConsumer``s (msgpack on the wire), each with its
        own connection, each acking what it received in one call."""
        acked = 0

        async def receiver() -> None:
            nonlocal acked
            async with Client(self.endpoint.url, timeout_s=OP_TIMEOUT_S) as client:
                consumer = QueueConsumer(client, name, max_messages=QUEUE_RECEIVE_MAX,
                                         visibility_timeout_ms=QUEUE_VISIBILITY_MS, wait_ms=QUEUE_WAIT_MS)
                while acked < count:
                    messages = await consumer.receive()
                    if messages:
                        result = await consumer.ack(messages)
                        acked += int(result["acked"])

        async with asyncio.timeout(OP_TIMEOUT_S):
            await asyncio.gather(*(receiver() for _ in range(QUEUE_RECEIVERS)))
        return acked
