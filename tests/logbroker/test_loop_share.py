"""``LoopShare``: long work on the loop gives it back once its slice is used, and only then; the
offsets log's replay, which held a node's loop for half a second in the chaos runs, shares it."""

from __future__ import annotations

import asyncio

from logbroker.groups.coordinator import GroupCoordinator
from logbroker.groups.requests import CommitRequest
from logbroker.loop_share import CHECK_EVERY, LoopShare
from tests.groups.test_commit_order import PARTITIONS, _joined
from tests.groups.test_coordinator_cost import FakeLog, FakeReplicas


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_due_only_once_the_slice_is_used_and_the_clock_read_every_few_steps():
    clock = Clock()
    share = LoopShare(0.01, clock=clock)
    assert not any(share.due() for _ in range(3 * CHECK_EVERY)), "within the slice: never"
    clock.now = 0.02
    answers = [share.due() for _ in range(CHECK_EVERY)]
    assert answers == [False] * (CHECK_EVERY - 1) + [True]


def test_take_gives_one_turn_to_others_and_starts_a_new_slice():
    async def run() -> tuple[int, bool, int]:
        clock = Clock()
        share = LoopShare(0.01, clock=clock)
        ran = []
        asyncio.get_running_loop().call_soon(ran.append, 1)
        clock.now = 1.0
        await share.take()
        again = any(share.due() for _ in range(2 * CHECK_EVERY))
        return len(ran), again, share.turns

    assert asyncio.run(run()) == (1, False, 1)


def test_replaying_the_offsets_log_lets_other_work_run_and_replays_it_all():
    async def run() -> tuple[int, int, int | None]:
        log = FakeLog()
        coordinator = GroupCoordinator(FakeReplicas({"t": PARTITIONS}), log)  # type: ignore[arg-type]
        member, generation = await _joined(coordinator)
        await coordinator.commit("g", CommitRequest(member, generation, (("t", 0, 50),), 1))
        for records in log.records:
            records *= 40_000 // max(1, len(records))
        ticks = 0
        loading = True

        async def other_work() -> None:
            nonlocal ticks
            while loading:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        replayed = GroupCoordinator(FakeReplicas({"t": PARTITIONS}), log)  # type: ignore[arg-type]
        before = ticks
        count = await replayed.load()
        during = ticks - before
        loading = False
        await ticker
        return count, during, replayed.committed("g", "t", 0)

    count, during, committed = asyncio.run(run())
    assert count >= 40_000 and committed == 50
    assert during >= 1, "other work ran while the log replayed"
