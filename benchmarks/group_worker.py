"""One member process of the groups benchmark: ``python -m benchmarks.group_worker URL GROUP TOPIC``.

Joins and prints ``ready``; on a ``go`` line on stdin it moves to the group's current generation
and consumes (committing after every poll) until stdin closes, then prints the records it read."""

from __future__ import annotations

import asyncio
import sys

import uvloop

from benchmarks.groups_bench import FETCH_BYTES
from logbroker.client import Client, GroupConsumer

RUN_S_MAX = 600


async def main(url: str, group: str, topic: str) -> None:
    loop = asyncio.get_running_loop()
    async with Client(url) as client:
        consumer = GroupConsumer(client, group, [topic], session_timeout_ms=30_000, enable_auto_commit=False,
                                 max_bytes=FETCH_BYTES, wait_ms=50)
        await consumer.start()
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)
        await consumer.sync()
        stopped = loop.run_in_executor(None, sys.stdin.readline)
        count = 0
        async with asyncio.timeout(RUN_S_MAX):
            while not stopped.done():
                records = await consumer.poll(timeout_ms=50)
                count += len(records)
                if records:
                    await consumer.commit()
        await consumer.close()
        print(count, flush=True)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
