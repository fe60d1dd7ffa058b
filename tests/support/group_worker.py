"""A group member in its own process, for the multi-process group tests.

``python -m tests.support.group_worker URL GROUP TOPIC SESSION_TIMEOUT_MS``: joins the group,
prints one JSON line per poll that returned records (member, generation, [partition, offset]
pairs) and per assignment change, commits after printing, and on SIGTERM commits and leaves.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import uvloop

from logbroker.client import Client, CommitFailedError, GroupConsumer

RUN_S_MAX = 300


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main(url: str, group: str, topic: str, session_timeout_ms: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with Client(url) as client:
        consumer = GroupConsumer(client, group, [topic], session_timeout_ms=session_timeout_ms,
                                 enable_auto_commit=False, wait_ms=100)

        def assigned(partitions: list[tuple[str, int]]) -> None:
            emit(event="assigned", member=consumer.member_id, generation=consumer.generation,
                 partitions=sorted(p for _, p in consumer.assignment()))

        consumer.on_assign = assigned
        consumer.on_revoke = assigned
        await consumer.start()
        emit(event="joined", member=consumer.member_id, generation=consumer.generation,
             partitions=sorted(p for _, p in consumer.assignment()))
        async with asyncio.timeout(RUN_S_MAX):
            while not stop.is_set():
                records = await consumer.poll(timeout_ms=100)
                if records:
                    emit(event="records", member=consumer.member_id, generation=consumer.generation,
                         records=[[r.partition, r.offset] for r in records])
                    try:
                        await consumer.commit()
                    except CommitFailedError as exc:
                        emit(event="commit_failed", member=consumer.member_id, status=exc.status)
        consumer.enable_auto_commit = True
        await consumer.close()
        emit(event="left")


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
