"""A queue worker in its own process, for the multi-process queue tests.

``python -m tests.support.queue_worker URL QUEUE VISIBILITY_MS MODE``: MODE ``ack`` receives
batches of 100 and acks each batch, printing one JSON line per batch (the offsets received with
their delivery counts, and how many the ack settled); MODE ``hold`` receives one batch, prints it
and then holds it without acking until killed. SIGTERM stops the loop.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import uvloop

from logbroker.client import Client, QueueConsumer

RUN_S_MAX = 300


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main(url: str, queue: str, visibility_ms: int, mode: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Client(url) as client:
        consumer = QueueConsumer(client, queue, max_messages=100, visibility_timeout_ms=visibility_ms, wait_ms=200)
        async with asyncio.timeout(RUN_S_MAX):
            while not stop.is_set():
                messages = await consumer.receive()
                if not messages:
                    continue
                emit(event="received", messages=[[m.partition, m.offset, m.delivery_count] for m in messages])
                if mode == "hold":
                    await stop.wait()
                    break
                result = await consumer.ack(messages)
                failed = {f["receipt"] for f in result["failed"]}
                emit(event="acked", acked=result["acked"],
                     offsets=[[m.partition, m.offset] for m in messages if m.receipt not in failed])


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
