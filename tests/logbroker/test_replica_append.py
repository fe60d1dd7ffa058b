"""Leader appends never fsync on the event loop: with the ``interval`` policy a due flush starts
in the background (the executor), and the data becomes durable without anyone waiting for it."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from logbroker.replica_manager import Replica, WaiterBudget
from segments.config import LogConfig
from segments.group_commit import GroupCommit
from segments.log import PartitionLog
from tests.segments.helpers import batch_of


@pytest.mark.asyncio
async def test_a_due_interval_flush_runs_in_the_background(tmp_path):
    now = [1_000_000]
    fsync_threads: list[str] = []

    def fsync(fd: int) -> None:
        fsync_threads.append(threading.current_thread().name)
        os.fsync(fd)

    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="interval", flush_ms=1000),
                            clock_ms=lambda: now[0], fsync=fsync)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="flusher") as pool:
        replica = Replica("t", 0, log, GroupCommit(log, pool), WaiterBudget(10))
        first = replica.append(batch_of([b"a"]))
        await replica.commit(first)
        fsync_threads.clear()  # creating the first segment syncs its directory once
        await replica.commit(replica.append(batch_of([b"a2"])))
        await asyncio.sleep(0.05)
        assert fsync_threads == [] and log.recovery_point == 0, "not due yet: nothing flushed"

        now[0] += 1000
        second = replica.append(batch_of([b"b"]))
        assert fsync_threads == [], "the append itself does not fsync"
        await replica.commit(second)
        async with asyncio.timeout(10):
            while log.recovery_point <= second.last_offset:
                await asyncio.sleep(0.01)
        assert fsync_threads and all(name.startswith("flusher") for name in fsync_threads)
        assert replica.high_watermark == second.log_end_offset
    log.close()
