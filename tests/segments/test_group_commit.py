"""Group commit: many concurrent appenders share fsyncs, and none returns before its data is
covered by a completed fsync."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from segments.config import LogConfig
from segments.errors import LogOfflineError, StorageBusyError
from segments.group_commit import GroupCommit
from segments.log import PartitionLog
from tests.segments.helpers import batch_of

APPENDERS = 200


class GatedFsync:
    """An fsync that blocks until released, counting calls, so the test controls timing."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, fd: int) -> None:
        self.gate.wait(timeout=10)
        self.calls += 1
        os.fsync(fd)


@pytest.mark.asyncio
async def test_concurrent_appends_share_fsyncs(tmp_path):
    fsync = GatedFsync()
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="always"), fsync=fsync)
    log.append(batch_of([b"warm"]), leader_epoch=0, flush=False)
    fsync.calls = 0
    with ThreadPoolExecutor(max_workers=1) as pool:
        commit = GroupCommit(log, pool)

        async def produce(i: int) -> int:
            info = log.append(batch_of([f"r{i}".encode()]), leader_epoch=0, flush=False)
            await commit.wait_durable(info.last_offset)
            assert log.recovery_point > info.last_offset
            return info.last_offset

        fsync.gate.clear()
        tasks = [asyncio.create_task(produce(i)) for i in range(APPENDERS)]
        await asyncio.sleep(0)
        assert not any(t.done() for t in tasks)
        fsync.gate.set()
        offsets = await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
    assert sorted(offsets) == list(range(1, APPENDERS + 1))
    assert commit.flushes <= 3 and fsync.calls <= 3
    log.close()


@pytest.mark.asyncio
async def test_waiters_are_bounded(tmp_path):
    fsync = GatedFsync()
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="always"), fsync=fsync)
    with ThreadPoolExecutor(max_workers=1) as pool:
        commit = GroupCommit(log, pool, waiters_max=2)
        log.append(batch_of([b"warm"]), leader_epoch=0, flush=False)  # writes the epoch checkpoint
        fsync.gate.clear()
        infos = [log.append(batch_of([b"x"]), leader_epoch=0, flush=False) for _ in range(3)]
        first = asyncio.create_task(commit.wait_durable(infos[0].last_offset))
        second = asyncio.create_task(commit.wait_durable(infos[1].last_offset))
        await asyncio.sleep(0)
        with pytest.raises(StorageBusyError):
            await commit.wait_durable(infos[2].last_offset)
        fsync.gate.set()
        await asyncio.wait_for(asyncio.gather(first, second), timeout=10)
    log.close()


@pytest.mark.asyncio
async def test_a_failing_fsync_fails_its_waiters(tmp_path):
    failing = [False]

    def fsync(fd: int) -> None:
        if failing[0]:
            raise OSError(5, "Input/output error")
        os.fsync(fd)

    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="never"), fsync=fsync)
    info = log.append(batch_of([b"x"]), leader_epoch=0)
    failing[0] = True
    with ThreadPoolExecutor(max_workers=1) as pool:
        commit = GroupCommit(log, pool)
        with pytest.raises(LogOfflineError, match="fsync failed"):
            await asyncio.wait_for(commit.wait_durable(info.last_offset), timeout=10)
        failing[0] = False  # a later fsync would succeed: the log stays offline all the same
        with pytest.raises(LogOfflineError):
            await asyncio.wait_for(commit.wait_durable(info.last_offset), timeout=10)
    assert log.recovery_point == 0
    log.close()
