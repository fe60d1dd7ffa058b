"""One queue worker process of the queue benchmark: ``python -m benchmarks.queue_worker URL QUEUE``.

Prints ``ready`` once connected, starts on a ``go`` line on stdin, receives batches of
``RECEIVE_BATCH`` and acks each batch until stdin closes, then prints the number it acked."""

from __future__ import annotations

import asyncio
import sys

import uvloop

from benchmarks.queue_bench import RECEIVE_BATCH, VISIBILITY_MS
from logbroker.client import Client, QueueConsumer

RUN_S_MAX = 600


async def main(url: str, queue: str) -> None:
    loop = asyncio.get_running_loop()
    async with Client(url) as client:
        consumer = QueueConsumer(client, queue, max_messages=RECEIVE_BATCH, visibility_timeout_ms=VISIBILITY_MS,
                                 wait_ms=50)
        await client.describe_topic(queue)
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        stopped = loop.run_in_executor(None, sys.stdin.readline)
        acked = 0
        async with asyncio.timeout(RUN_S_MAX):
            while not stopped.done():
                messages = await consumer.receive()
                if messages:
                    acked += int((await consumer.ack(messages))["acked"])
        print(acked, flush=True)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2]))
