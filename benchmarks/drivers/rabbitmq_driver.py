"""RabbitMQ through its own Python clients, with the settings measured best here (PEERS.md §3):
streams (the append-only log, ``rabbitmq_stream`` plugin) through rstream — ``send_batch`` of
``BATCH`` raw messages with at most ``CONFIRM_WINDOW`` unconfirmed, consumers subscribed with
rstream's default credit; queues (for receive+ack) through aio-pika — a durable classic queue,
persistent messages, publisher confirms, ``PREFETCH`` unacked deliveries per consumer and one
``ack(multiple=True)`` per ``ACK_EVERY`` messages. A single node, so nothing is replicated.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

import aio_pika
from rstream import ConfirmationStatus, Consumer, ConsumerOffsetSpecification, MessageContext, OffsetType, Producer

from benchmarks.drivers.base import OP_TIMEOUT_S, Driver, latency_ms

BATCH: Final = 1000
CONFIRM_WINDOW: Final = 10_000
PREFETCH: Final = 1000
ACK_EVERY: Final = 100
QUEUE_PUBLISH_WINDOW: Final = 1000
USER: Final = "guest"
PASSWORD: Final = "guest"


class RabbitMQDriver(Driver):
    system = "rabbitmq"
    fsync_unsupported = ("RabbitMQ streams have no fsync setting: a publish confirm means written to the "
                         "segment file on the leader (page cache)")

    def __init__(self, endpoint: Any) -> None:
        super().__init__(endpoint)
        self._producer: Any = None
        self._amqp: Any = None
        self._sent = 0
        self._confirmed = 0
        self._confirm_event = asyncio.Event()

    async def connect(self) -> None:
        self._producer = Producer(self.endpoint.host, self.endpoint.port, username=USER, password=PASSWORD)
        await self._producer.start()

    async def close(self) -> None:
        await self.settle()
        if self._producer is not None:
            await self._producer.close()
        if self._amqp is not None:
            await self._amqp.close()

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "client": f"rstream {version('rstream')} (streams), aio-pika {version('aio-pika')} (queues), uvloop",
            "durability": "stream on one node, no fsync per message or batch (confirm = written to the "
                          "segment file); queue: durable classic queue, persistent messages, publisher confirms",
            "produce": f"send_batch of {BATCH} raw messages, at most {CONFIRM_WINDOW} unconfirmed, every confirm "
                       "awaited",
            "consume": "subscribe from OffsetType.FIRST with rstream's default credit (10 chunks)",
            "publish": "Producer.send_wait: one message sent and its confirm awaited before the next",
            "tail": "subscribe at OffsetType.NEXT; paced sends with send_batch of the due messages",
            "idle": "one connection and one stream subscription at OffsetType.NEXT per consumer",
            "queue": f"aio-pika, publish with confirms ({QUEUE_PUBLISH_WINDOW} in flight), consume with "
                     f"prefetch_count {PREFETCH}, ack(multiple=True) every {ACK_EVERY} messages",
        }

    async def create_log(self, name: str, *, fsync: bool = False) -> None:
        assert not fsync, self.fsync_unsupported
        await self._producer.create_stream(name, exists_ok=True)

    def _on_confirm(self, status: ConfirmationStatus) -> None:
        if status.is_confirmed:
            self._confirmed += 1
        self._confirm_event.set()

    async def _wait_confirms(self, until: Callable[[], bool]) -> None:
        while not until():
            self._confirm_event.clear()
            await self._confirm_event.wait()

    async def produce(self, log: str, payload: bytes, count: int, *, fsync: bool = False) -> int:
        assert not fsync, self.fsync_unsupported
        start_confirmed, batch = self._confirmed, [payload] * BATCH
        async with asyncio.timeout(OP_TIMEOUT_S):
            for sent in range(0, count, BATCH):
                def room(s: int = sent) -> bool:
                    return s - (self._confirmed - start_confirmed) <= CONFIRM_WINDOW - BATCH

                await self._wait_confirms(room)
                await self._producer.send_batch(log, batch[:min(BATCH, count - sent)],
                                                on_publish_confirm=self._on_confirm)
            await self._wait_confirms(lambda: self._confirmed - start_confirmed >= count)
        return self._confirmed - start_confirmed

    async def prepare_sends(self, log: str) -> None:
        """Paced sends go on the connection ``connect`` made: nothing to open."""

    async def publish_one(self, log: str, payload: bytes) -> None:
        await self._producer.send_wait(log, payload, timeout=int(OP_TIMEOUT_S))

    async def _subscribe(self, log: str, offset: OffsetType, on_message: Callable[[bytes], None]) -> Any:
        consumer = Consumer(self.endpoint.host, self.endpoint.port, username=USER, password=PASSWORD)
        await consumer.start()

        async def callback(msg: Any, _ctx: MessageContext) -> None:
            on_message(msg)

        await consumer.subscribe(log, callback, offset_specification=ConsumerOffsetSpecification(offset, None))
        return consumer

    async def consume(self, log: str, count: int) -> int:
        got = 0
        enough = asyncio.Event()

        def on_message(msg: bytes) -> None:
            nonlocal got
            got += 1
            if got >= count:
                enough.set()

        consumer = await self._subscribe(log, OffsetType.FIRST, on_message)
        self.defer(consumer.close())
        async with asyncio.timeout(OP_TIMEOUT_S):
            await enough.wait()
        return got

    async def send_now(self, log: str, payloads: list[bytes]) -> None:
        self._sent += len(payloads)
        await self._producer.send_batch(log, payloads, on_publish_confirm=self._on_confirm)

    async def flush_sends(self) -> None:
        async with asyncio.timeout(OP_TIMEOUT_S):
            await self._wait_confirms(lambda: self._confirmed >= self._sent)

    async def receive_latencies(self, log: str, count: int, ready: Callable[[], None],
                                deadline_s: float) -> list[float]:
        latencies: list[float] = []
        enough = asyncio.Event()

        def on_message(msg: bytes) -> None:
            latencies.append(latency_ms(msg, time.time_ns()))
            if len(latencies) >= count:
                enough.set()

        consumer = await self._subscribe(log, OffsetType.NEXT, on_message)
        ready()
        try:
            async with asyncio.timeout(max(0.0, deadline_s - time.monotonic())):
                await enough.wait()
        except TimeoutError:
            pass
        finally:
            await consumer.close()
        return latencies

    async def hold_idle(self, log: str, consumers: int, ready: Callable[[], None], stop: asyncio.Event) -> int:
        held: list[Any] = []
        try:
            async with asyncio.timeout(OP_TIMEOUT_S):
                for _ in range(consumers):
                    held.append(await self._subscribe(log, OffsetType.NEXT, lambda _msg: None))
            ready()
            await stop.wait()
        finally:
            await asyncio.gather(*(c.close() for c in held), return_exceptions=True)
        return len(held)

    async def _channel(self) -> Any:
        if self._amqp is None:
            self._amqp = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:{self.endpoint.amqp_port}/",
                                                timeout=30)
        return await self._amqp.channel(publisher_confirms=True)

    async def create_queue(self, name: str) -> None:
        channel = await self._channel()
        await channel.declare_queue(name, durable=True)
        await channel.close()

    async def queue_send(self, name: str, payload: bytes, count: int) -> int:
        channel = await self._channel()
        slots = asyncio.Semaphore(QUEUE_PUBLISH_WINDOW)
        confirmed = 0

        async def publish() -> None:
            nonlocal confirmed
            try:
                await channel.default_exchange.publish(
                    aio_pika.Message(payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key=name)
                confirmed += 1
            finally:
                slots.release()

        tasks = set()
        async with asyncio.timeout(OP_TIMEOUT_S):
            for _ in range(count):
                await slots.acquire()
                task = asyncio.create_task(publish())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.gather(*tasks)
        await channel.close()
        return confirmed

    async def queue_receive_ack(self, name: str, count: int) -> int:
        channel = await self._channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        queue = await channel.get_queue(name)
        acked = 0
        enough = asyncio.Event()

        async def on_message(message: Any) -> None:
            nonlocal acked
            acked += 1
            if acked % ACK_EVERY == 0 or acked >= count:
                await message.ack(multiple=True)
            if acked >= count:
                enough.set()

        async with asyncio.timeout(OP_TIMEOUT_S):
            tag = await queue.consume(on_message)
            await enough.wait()
        self.defer(self._stop_consuming(channel, queue, tag))
        return acked

    @staticmethod
    async def _stop_consuming(channel: Any, queue: Any, tag: Any) -> None:
        await queue.cancel(tag)
        await channel.close()
