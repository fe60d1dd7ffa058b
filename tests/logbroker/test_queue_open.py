"""Opening a queue replays its state log while giving the loop back, so: the queue is published
only if the leaderships it was read under still hold, and never half-built."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from coordinator.models import TopicMetadata
from logbroker.errors import NotLeaderError
from logbroker.internal_log import pack
from logbroker.queues.manager import QueueManager

EVENTS = 40_000


class StateLog:
    """What ``QueueManager.open`` reads of an ``InternalLog``: each partition's records, oldest first."""

    partitions = 1

    def replay(self, partition: int) -> Iterator[SimpleNamespace]:
        for offset in range(EVENTS):
            yield SimpleNamespace(key=None, value=pack(["A", []]), offset=offset)


def queue_meta() -> TopicMetadata:
    return TopicMetadata("jobs", "qid", 1, 1, "queue", {}, "alice", 1)  # type: ignore[arg-type]


def manager() -> QueueManager:
    async def produce(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("opening produces nothing")

    return QueueManager(None, produce)  # type: ignore[arg-type]


def test_a_queue_whose_leadership_changed_during_its_replay_is_not_published():
    queues = manager()
    with pytest.raises(NotLeaderError):
        asyncio.run(queues.open(queue_meta(), StateLog(), None, still_led=lambda: False))  # type: ignore[arg-type]
    assert not queues.has("jobs")


def test_a_queue_still_led_after_its_replay_is_published_and_others_ran_meanwhile():
    async def run() -> tuple[int, bool, list[bool]]:
        queues = manager()
        opening = True
        seen: list[bool] = []  # what other work saw of the queue while it was being opened

        async def other_work() -> None:
            while opening:
                seen.append(queues.has("jobs"))
                await asyncio.sleep(0)

        other = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        seen.clear()
        count = await queues.open(queue_meta(), StateLog(), None, still_led=lambda: True)  # type: ignore[arg-type]
        opening = False
        await other
        return count, queues.has("jobs"), seen

    count, published, seen = asyncio.run(run())
    assert count == EVENTS and published
    assert seen and not any(seen), "other work ran while the state log replayed, and saw no half-built queue"
