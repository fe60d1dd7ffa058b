"""A consumer with nothing assigned waits its timeout in ``poll`` instead of returning at once: a
``while True: await consumer.poll()`` loop must let the event loop run (a group member's
heartbeats bring its next assignment; a loop that never yields starved them, and everything else,
for good)."""

from __future__ import annotations

import asyncio

from logbroker.client import Client, Consumer


def test_an_unassigned_poll_waits_and_lets_other_tasks_run():
    async def main() -> tuple[list, int]:
        async with Client("http://127.0.0.1:1") as client:  # no call is made: nothing is assigned
            consumer = Consumer(client, wait_ms=20)
            ticks = 0

            async def other() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(other())
            polled = [await consumer.poll() for _ in range(3)] + [await consumer.poll_batches(timeout_ms=20)]
            task.cancel()
            return polled, ticks

    polled, ticks = asyncio.run(main())
    assert polled == [[], [], [], []] and ticks > 0
