"""A queue worker in its own process, for the multi-process queue tests.

``python -m tests.support.queue_worker URL QUEUE VISIBILITY_MS MODE``: MODE ``ack`` receives
batches of 100 and acks each batch, printing one JSON line per batch (the offsets received with
their delivery counts, and how many the ack settled); MODE ``hold`` receives one batch, prints it
and then holds it without acking until killed. SIGTERM stops the loop. Retriable errors (the node
restarting) are retried.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

import uvloop

from logbroker.client import Client, LogBrokerError, QueueConsumer

RUN_S_MAX = 300
RETRY_S = 0.1


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main(url: str, queue: str, visibility_ms: int, mode: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Client(url) as client:
        consumer = QueueConsumer(client, queue, max_messages=100, visibility_timeout_ms=visibility_ms, wait_ms=200)
        emit(event="ready")
        async with asyncio.timeout(RUN_S_MAX):
            while not stop.is_set():
                try:
                    await one_batch(consumer, mode, stop)
                except LogBrokerError as exc:
                    if not exc.retriable:
                        raise
                    emit(event="retry", error=str(exc)[:200])  # the node is away (a restart): try again
                    await asyncio.sleep(RETRY_S)


async def one_batch(consumer: QueueConsumer, mode: str, stop: asyncio.Event) -> None:
    messages = await consumer.receive()
    if not messages:
        return
    emit(event="received", at=time.time(),
         messages=[[m.partition, m.offset, m.delivery_count] for m in messages])
    if mode == "hold":
        await stop.wait()
        return
    try:
        result = await consumer.ack(messages)
    except LogBrokerError as exc:  # every lease ran out first (409): nothing settled
        if exc.code != "lease_expired":
            raise
        result = {"acked": 0, "failed": [{"receipt": m.receipt} for m in messages]}
    failed = {f["receipt"] for f in result["failed"]}
    emit(event="acked", at=time.time(), acked=result["acked"],
         offsets=[[m.partition, m.offset] for m in messages if m.receipt not in failed])


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
