"""``set_topic_config`` on the etcd coordinator against a real etcd, with records sealed: the new
config reaches another node's cache (so its seal verifies there), a refused update writes
nothing, and concurrent changes are each applied to the config the other left (guarded retry)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from coordinator.errors import InvalidTopicError, UnknownTopicError
from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import parse_etcd_url
from coordinator.models import TopicMetadata
from tests.coordinator.test_etcd import TTL_MS, eventually, node, spec
from tests.support.etcd import EtcdServer

SECRET = "a-cluster-secret-for-seal-tests"


@pytest_asyncio.fixture(loop_scope="function")
async def pair(etcd_server: EtcdServer) -> AsyncIterator[tuple[EtcdCoordinator, EtcdCoordinator]]:
    cluster = f"config-{time.monotonic_ns()}"
    started = [EtcdCoordinator(parse_etcd_url(etcd_server.url), cluster, node(i), TTL_MS, seal_secret=SECRET)
               for i in (1, 2)]
    for coordinator in started:
        await coordinator.start()
    yield started[0], started[1]
    for coordinator in started:
        await coordinator.close()


@pytest.mark.asyncio
async def test_a_config_change_is_sealed_and_seen_by_the_other_nodes(pair):
    a, b = pair
    created = await a.create_topic(spec("cfg", 2, 2), "alice")
    changed = await b.set_topic_config("cfg", lambda meta: {**meta.config, "retention_ms": 1000})
    assert changed.config == {"retention_ms": 1000}
    assert (changed.topic_id, changed.owner, changed.partitions) == (created.topic_id, "alice", 2)
    seen = await eventually(lambda: (m := a.cached_topic("cfg")) is not None and m.config and m, "the change on a")
    assert seen == changed and a.rejected_records == b.rejected_records == 0

    def refuse(meta: TopicMetadata) -> dict[str, Any]:
        raise InvalidTopicError("no")

    with pytest.raises(InvalidTopicError):
        await a.set_topic_config("cfg", refuse)
    assert (await a.get_topic("cfg")).config == {"retention_ms": 1000}
    with pytest.raises(UnknownTopicError):
        await a.set_topic_config("missing", lambda meta: {})


@pytest.mark.asyncio
async def test_concurrent_changes_each_apply_to_what_the_other_left(pair):
    a, b = pair
    await a.create_topic(spec("count", 1, 2), None)
    await eventually(lambda: b.cached_topic("count") is not None, "the topic on b")

    def bump(meta: TopicMetadata) -> dict[str, Any]:
        return {**meta.config, "flush_ms": int(meta.config.get("flush_ms", 1000)) + 1}

    await asyncio.gather(*(c.set_topic_config("count", bump) for c in (a, b, a, b)))
    assert (await a.get_topic("count")).config == {"flush_ms": 1004}
