"""NATS JetStream through nats-py, with the settings measured best with it here (PEERS.md §2):
``publish_async`` with a window of ``PUBLISH_WINDOW`` un-acked publishes; consumers are durable
pull consumers fetching ``FETCH_BATCH`` at a time with ``AckPolicy.ALL`` (one ack per batch);
the latency consumer is an ordered push consumer. Streams use the file store, one replica.
JetStream 2.9 has no fsync setting, so the fsync'd variant is not offered.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any, Final

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StorageType, StreamConfig

from benchmarks.drivers.base import OP_TIMEOUT_S, Driver, latency_ms

PUBLISH_WINDOW: Final = 1000
FETCH_BATCH: Final = 1000
FETCH_TIMEOUT_S: Final = 5.0
IDLE_FETCH_TIMEOUT_S: Final = 10.0
QUEUE_ACK_PENDING_MAX: Final = 20_000


class NatsDriver(Driver):
    system = "nats"
    fsync_unsupported = "nats-server 2.9 has no fsync setting for JetStream (sync_interval arrived in 2.10)"

    def __init__(self, endpoint: Any) -> None:
        super().__init__(endpoint)
        self._nc: Any = None
        self._js: Any = None
        self._names = itertools.count()
        self._sends_failed = 0

    async def connect(self) -> None:
        self._nc = await nats.connect(self.endpoint.url, connect_timeout=10, max_reconnect_attempts=0)
        self._js = self._nc.jetstream(publish_async_max_pending=PUBLISH_WINDOW)

    async def close(self) -> None:
        await self.settle()
        if self._nc is not None:
            await self._nc.close()

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "client": f"nats-py {version('nats-py')} (uvloop)",
            "durability": "JetStream file store, 1 replica, no fsync (the OS writes back); publish ack = "
                          "appended to the stream file",
            "produce": f"js.publish_async, at most {PUBLISH_WINDOW} un-acked publishes",
            "consume": f"durable pull consumer, fetch({FETCH_BATCH}), AckPolicy.ALL, one ack per batch",
            "publish": "JetStream publish: one message, its PubAck awaited before the next",
            "tail": "ordered push consumer from DeliverPolicy.NEW; paced sends with publish_async",
            "idle": f"one connection and one durable pull consumer per consumer, fetch(1, timeout="
                    f"{IDLE_FETCH_TIMEOUT_S:g} s) in a loop",
            "queue": f"work-queue stream (file store), durable pull consumer, AckPolicy.EXPLICIT, "
                     f"fetch({FETCH_BATCH}), one ack per message, max_ack_pending {QUEUE_ACK_PENDING_MAX}",
        }

    async def create_log(self, name: str, *, fsync: bool = False) -> None:
        assert not fsync, self.fsync_unsupported
        await self._js.add_stream(StreamConfig(name=name, subjects=[name], storage=StorageType.FILE, num_replicas=1))

    async def _publish(self, subject: str, payload: bytes, count: int) -> int:
        acked = 0

        def done(future: asyncio.Future[Any]) -> None:
            nonlocal acked
            if not future.cancelled() and future.exception() is None:
                acked += 1

        async with asyncio.timeout(OP_TIMEOUT_S):
            for _ in range(count):
                (await self._js.publish_async(subject, payload)).add_done_callback(done)
            await self._js.publish_async_completed()
        return acked

    async def produce(self, log: str, payload: bytes, count: int, *, fsync: bool = False) -> int:
        assert not fsync, self.fsync_unsupported
        return await self._publish(log, payload, count)

    async def consume(self, log: str, count: int) -> int:
        got = 0
        async with asyncio.timeout(OP_TIMEOUT_S):
            sub = await self._js.pull_subscribe(
                log, durable=f"c{next(self._names)}", stream=log,
                config=ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=-1, deliver_policy=DeliverPolicy.ALL))
            while got < count:
                msgs = await sub.fetch(min(FETCH_BATCH, count - got), timeout=FETCH_TIMEOUT_S)
                for msg in msgs:
                    _ = msg.data
                got += len(msgs)
                await msgs[-1].ack()
        self.defer(sub.unsubscribe())
        return got

    async def prepare_sends(self, log: str) -> None:
        """Paced sends go on the connection ``connect`` made: nothing to open."""

    async def publish_one(self, log: str, payload: bytes) -> None:
        await self._js.publish(log, payload, timeout=OP_TIMEOUT_S)

    async def send_now(self, log: str, payloads: list[bytes]) -> None:
        for payload in payloads:
            future = await self._js.publish_async(log, payload)
            future.add_done_callback(self._count_failure)

    def _count_failure(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self._sends_failed += 1

    async def flush_sends(self) -> None:
        async with asyncio.timeout(OP_TIMEOUT_S):
            await self._js.publish_async_completed()
        if self._sends_failed:
            raise RuntimeError(f"{self._sends_failed} paced publishes failed")

    async def receive_latencies(self, log: str, count: int, ready: Callable[[], None],
                                deadline_s: float) -> list[float]:
        latencies: list[float] = []
        enough = asyncio.Event()

        async def on_message(msg: Any) -> None:
            latencies.append(latency_ms(msg.data, time.time_ns()))
            if len(latencies) >= count:
                enough.set()

        sub = await self._js.subscribe(log, cb=on_message, manual_ack=True, ordered_consumer=True,
                                       deliver_policy=DeliverPolicy.NEW)
        ready()
        try:
            async with asyncio.timeout(max(0.0, deadline_s - time.monotonic())):
                await enough.wait()
        except TimeoutError:
            pass
        await sub.unsubscribe()
        return latencies

    async def hold_idle(self, log: str, consumers: int, ready: Callable[[], None], stop: asyncio.Event) -> int:
        connections: list[Any] = []
        tasks: list[asyncio.Task[None]] = []

        async def wait_loop(sub: Any) -> None:
            while not stop.is_set():
                try:
                    await sub.fetch(1, timeout=IDLE_FETCH_TIMEOUT_S)
                except nats.errors.TimeoutError:
                    continue

        try:
            async with asyncio.timeout(OP_TIMEOUT_S):
                for i in range(consumers):
                    nc = await nats.connect(self.endpoint.url, connect_timeout=10, max_reconnect_attempts=0)
                    connections.append(nc)
                    sub = await nc.jetstream().pull_subscribe(log, durable=f"idle{i}", stream=log)
                    tasks.append(asyncio.create_task(wait_loop(sub)))
            ready()
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(nc.close() for nc in connections), return_exceptions=True)
        return len(tasks)

    async def create_queue(self, name: str) -> None:
        await self._js.add_stream(StreamConfig(name=name, subjects=[name], storage=StorageType.FILE, num_replicas=1,
                                               retention=RetentionPolicy.WORK_QUEUE))

    async def queue_send(self, name: str, payload: bytes, count: int) -> int:
        return await self._publish(name, payload, count)

    async def queue_receive_ack(self, name: str, count: int) -> int:
        acked = 0
        async with asyncio.timeout(OP_TIMEOUT_S):
            sub = await self._js.pull_subscribe(
                name, durable=f"q{next(self._names)}", stream=name,
                config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=QUEUE_ACK_PENDING_MAX))
            while acked < count:
                msgs = await sub.fetch(min(FETCH_BATCH, count - acked), timeout=FETCH_TIMEOUT_S)
                for msg in msgs:
                    await msg.ack()
                acked += len(msgs)
        self.defer(sub.unsubscribe())
        return acked
