"""Fetches waiting at the end of a partition: woken by the append that passes their offset,
returned when their wait runs out, and never left behind in the replica's list of waiters (an idle
tail waits again and again; a partition nobody writes to must not collect its lapsed waits)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from logbroker.errors import NotAvailableError
from logbroker.replica_manager import Replica, WaiterBudget
from segments.config import LogConfig
from segments.group_commit import GroupCommit
from segments.log import PartitionLog
from tests.segments.helpers import batch_of


@pytest.fixture
def replica(tmp_path):
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="interval"))
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield Replica("t", 0, log, GroupCommit(log, pool), WaiterBudget(4))
    log.close()


@pytest.mark.asyncio
async def test_lapsed_waits_return_and_leave_nothing_behind(replica):
    for _ in range(50):
        started = time.monotonic()
        await replica.wait_for_data(0, 2)
        assert time.monotonic() - started >= 0.001
    assert replica._waiters == []
    budget = replica._budget
    assert budget.used == 0


@pytest.mark.asyncio
async def test_an_append_wakes_every_waiter_at_once(replica):
    waits = [asyncio.create_task(replica.wait_for_data(0, 10_000)) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waits)
    started = time.monotonic()
    await replica.commit(replica.append(batch_of([b"a"])))
    await asyncio.wait_for(asyncio.gather(*waits), timeout=5)
    assert time.monotonic() - started < 5
    assert replica._waiters == [] and replica._budget.used == 0


@pytest.mark.asyncio
async def test_a_cancelled_wait_is_removed_and_gives_its_slot_back(replica):
    wait = asyncio.create_task(replica.wait_for_data(0, 10_000))
    await asyncio.sleep(0.01)
    wait.cancel()
    with pytest.raises(asyncio.CancelledError):
        await wait
    assert replica._waiters == [] and replica._budget.used == 0


@pytest.mark.asyncio
async def test_waits_beyond_the_budget_are_refused(replica):
    waits = [asyncio.create_task(replica.wait_for_data(0, 10_000)) for _ in range(4)]
    await asyncio.sleep(0.01)
    with pytest.raises(NotAvailableError):
        await replica.wait_for_data(0, 10_000)
    await replica.commit(replica.append(batch_of([b"a"])))
    await asyncio.wait_for(asyncio.gather(*waits), timeout=5)
