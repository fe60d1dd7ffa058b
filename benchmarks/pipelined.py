"""Produce prebuilt batches with a bounded number of requests in flight: the load every LogBroker
benchmark puts on a node. ``make_batch(n)`` gives the n-th batch (built per call, or one batch
reused), and batch n goes to partition ``n % partitions``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from logbroker.client import Client


async def produce_pipelined(client: Client, topic: str, batches: int, make_batch: Callable[[int], bytes], *,
                            partitions: int, in_flight: int) -> float:
    """Seconds to send ``batches`` batches with at most ``in_flight`` requests outstanding."""
    queue: asyncio.Queue[int | None] = asyncio.Queue(maxsize=in_flight * 2)

    async def sender() -> None:
        while (n := await queue.get()) is not None:
            await client.produce_batch(topic, n % partitions, make_batch(n), acks="1")

    started = time.perf_counter()
    workers = [asyncio.create_task(sender()) for _ in range(in_flight)]
    for n in range(batches):
        await queue.put(n)
    for _ in workers:
        await queue.put(None)
    await asyncio.gather(*workers)
    return time.perf_counter() - started
