"""A flood of group operations (issue 14: 80,000 joins once wedged the node for hours) leaves a
real node answering ``/healthz`` throughout and stopping on SIGTERM. 10,000 new groups each get
their offsets set (8 records) and a member whose session lapses 100 ms after its join: about 12,000
records and 11,000 live ones per ``__consumer_offsets`` partition, past the size where deciding on
a snapshot once sorted every group on every change, while expiries pile up. The bounds are
generous (a wedged node missed them by minutes)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp
import pytest

from tests.support.nodes import NodeProcess

GROUPS = 10_000
TOPIC_PARTITIONS = 8
CONCURRENCY = 32
HEALTH_EVERY_S = 0.05
HEALTH_S_MAX = 1.0
STOP_S_MAX = 10.0


async def flood(session: aiohttp.ClientSession, url: str, first: int, count: int) -> int:
    """Set the offsets of ``count`` new groups and join each, ``CONCURRENCY`` at a time; returns
    how many groups were joined."""
    next_index, joined = first, 0

    async def lane() -> None:
        nonlocal next_index, joined
        while next_index < first + count:
            i = next_index
            next_index += 1
            async with session.post(f"{url}/v1/groups/flood{i:06d}/offsets/reset",
                                    json={"topic": "flooded", "to": "earliest"}) as reply:
                await reply.read()
                assert reply.status == 200, reply.status
            async with session.post(f"{url}/v1/groups/flood{i:06d}/members",
                                    json={"topics": ["flooded"], "session_timeout_ms": 100}) as reply:
                await reply.read()
                joined += reply.status == 200

    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    return joined


async def probe(url: str, latencies: list[float]) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        while True:
            sent = time.perf_counter()
            async with session.get(f"{url}/healthz") as reply:
                await reply.read()
                assert reply.status == 200
            latencies.append(time.perf_counter() - sent)
            await asyncio.sleep(HEALTH_EVERY_S)


@pytest.mark.asyncio
async def test_a_join_flood_leaves_healthz_answering_and_sigterm_stopping(tmp_path) -> None:
    node = NodeProcess(str(tmp_path / "data")).start()
    try:
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
            topic = {"name": "flooded", "partitions": TOPIC_PARTITIONS}
            async with session.post(f"{node.url}/v1/topics", json=topic) as reply:
                assert reply.status == 201
            latencies: list[float] = []
            prober = asyncio.create_task(probe(node.url, latencies))
            try:
                assert await flood(session, node.url, 0, GROUPS) == GROUPS
                await asyncio.sleep(1.0)  # the last sessions lapse and expire
            finally:
                prober.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await prober
            assert len(latencies) > 20, "the probe ran through the flood"
            assert max(latencies) < HEALTH_S_MAX, f"slowest /healthz {max(latencies):.3f} s"
            async with session.get(f"{node.url}/v1/groups/flood{GROUPS - 1:06d}") as reply:
                last = await reply.json()
            assert last["state"] == "empty" and last["generation"] == 2, "joined, then expired: one rebalance"

            more = asyncio.create_task(flood(session, node.url, GROUPS, GROUPS))
            await asyncio.sleep(1.0)
            stopping = time.perf_counter()
            code = await asyncio.to_thread(node.stop)
            stopped_s = time.perf_counter() - stopping
            more.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError, AssertionError):
                await more
        assert code == 0, f"the node exited with {code} after SIGTERM"
        assert stopped_s < STOP_S_MAX, f"SIGTERM took {stopped_s:.1f} s"
    finally:
        node.stop()
        node.kill()
