"""Usage records on a real etcd with sealed records (decision 0298): another node reads what one
wrote; a record written to etcd directly, without the cluster's seal, is not billed; the records
stay out of the cluster prefix the nodes watch, so no node's metadata cache carries them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import EtcdClient, op_put, parse_etcd_url
from coordinator.etcd_keys import encode, usage_key, usage_prefix
from tests.coordinator.test_etcd import TTL_MS, node
from tests.coordinator.test_etcd_topic_config import SECRET
from tests.support.etcd import EtcdServer

HOUR = 3_600_000


@pytest_asyncio.fixture(loop_scope="function")
async def pair(etcd_server: EtcdServer) -> AsyncIterator[tuple[str, EtcdCoordinator, EtcdCoordinator]]:
    cluster = f"usage-{time.monotonic_ns()}"
    started = [EtcdCoordinator(parse_etcd_url(etcd_server.url), cluster, node(i), TTL_MS, seal_secret=SECRET)
               for i in (1, 2)]
    for coordinator in started:
        await coordinator.start()
    yield cluster, started[0], started[1]
    for coordinator in started:
        await coordinator.close()


@pytest.mark.asyncio
async def test_a_sealed_record_is_read_by_another_node_and_a_forged_one_is_not(pair, etcd_server) -> None:
    cluster, a, b = pair
    await a.put_usage(5 * HOUR, 1, [["alice", "t", 10, 1, 0, 0, 1, 0, 0]])
    assert await b.usage_between(5 * HOUR, 6 * HOUR) == [(5 * HOUR, 1, [["alice", "t", 10, 1, 0, 0, 1, 0, 0]])]
    client = EtcdClient(parse_etcd_url(etcd_server.url))
    try:
        forged = (usage_prefix(cluster) + usage_key(5 * HOUR, 3)).encode()
        await client.txn([], [op_put(forged, encode({"rows": [["mallory", "t", 0, 0, 0, 0, 0, 0, 0]]}))])
    finally:
        await client.close()
    assert [n for _, n, _ in await b.usage_between(5 * HOUR, 6 * HOUR)] == [1], "an unsealed record is left out"
    assert not any("usage" in key for key in a._cache._entries), "the watch of the cluster prefix never sees them"
