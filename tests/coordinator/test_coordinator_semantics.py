"""Users, ownership, ACLs and consumer-group records behave the same on the embedded and the etcd
coordinator (one set of assertions, run against both; the etcd one on a real etcd, and again on the
simulation's in-memory etcd, which so keeps the contract the real one does)."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.base import Coordinator
from coordinator.errors import (
    TopicExistsError,
    UnknownGroupRecordError,
    UnknownTopicError,
    UnknownUserError,
    UserExistsError,
    UserOwnsTopicsError,
)
from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import parse_etcd_url
from coordinator.local import LocalCoordinator
from coordinator.models import NodeInfo, TopicSpec
from coordinator.users import GroupRecord, UserRecord
from segments.config import LogConfig
from sim.etcd import SimEtcd, SimEtcdClient
from tests.support.etcd import EtcdServer

NODE = NodeInfo(1, "http://127.0.0.1:1", "127.0.0.1:2")
_clusters = itertools.count()
READ, WRITE = frozenset({"read"}), frozenset({"write"})


@pytest_asyncio.fixture(loop_scope="function", params=["local", "etcd", "sim"])
async def coordinator(request: pytest.FixtureRequest, tmp_path, etcd_server: EtcdServer) -> AsyncIterator[Coordinator]:
    made: Coordinator
    if request.param == "local":
        made = LocalCoordinator(str(tmp_path), NODE)
    elif request.param == "sim":
        made = EtcdCoordinator(["etcd:2379"], "sem", NODE, 2000,
                               client_factory=SimEtcdClient.factory(SimEtcd(random.Random(0)), "node1"))
    else:
        made = EtcdCoordinator(parse_etcd_url(etcd_server.url), f"sem{next(_clusters)}-{time.monotonic_ns()}",
                               NODE, 2000)
    await made.start()
    try:
        yield made
    finally:
        await made.close()


def user(name: str) -> UserRecord:
    return UserRecord(name, "user", "hash", 0, user_id=f"id-{name}")


async def topic(c: Coordinator, name: str, owner: str | None) -> None:
    await c.create_topic(TopicSpec.parse({"name": name}, base_config=LogConfig()), owner)


@pytest.mark.asyncio
async def test_users(coordinator: Coordinator):
    await coordinator.create_user(user("bob"))
    await coordinator.create_user(user("alice"))
    with pytest.raises(UserExistsError):
        await coordinator.create_user(user("bob"))
    assert await coordinator.find_user("bob") == user("bob")
    assert await coordinator.find_user("nobody") is None
    assert [u.name for u in await coordinator.list_users()] == ["alice", "bob"]
    changed = user("bob").with_new_credentials("other")
    await coordinator.update_user(changed)
    assert await coordinator.find_user("bob") == changed
    with pytest.raises(UnknownUserError):
        await coordinator.update_user(user("nobody"))
    with pytest.raises(UnknownUserError):
        await coordinator.delete_user("nobody")
    assert await coordinator.delete_user("alice") == []
    assert [u.name for u in await coordinator.list_users()] == ["bob"]


@pytest.mark.asyncio
async def test_acls_and_owners(coordinator: Coordinator):
    for name in ("alice", "bob"):
        await coordinator.create_user(user(name))
    await topic(coordinator, "t", "alice")
    with pytest.raises(TopicExistsError):
        await topic(coordinator, "t", "bob")
    with pytest.raises(UnknownTopicError):
        await coordinator.set_acl("missing", "bob", READ)
    with pytest.raises(UnknownTopicError):
        await coordinator.get_acl("missing")
    with pytest.raises(UnknownUserError):
        await coordinator.set_acl("t", "nobody", READ)
    assert await coordinator.set_acl("t", "bob", READ | WRITE) == {"bob": READ | WRITE}
    assert await coordinator.set_acl("t", "alice", READ) == {"bob": READ | WRITE, "alice": READ}
    assert await coordinator.set_acl("t", "bob", frozenset()) == {"alice": READ}
    assert await coordinator.get_acl("t") == {"alice": READ}
    with pytest.raises(UnknownUserError):
        await coordinator.set_owner("t", "nobody")
    assert (await coordinator.set_owner("t", "bob")).owner == "bob"
    assert (await coordinator.get_topic("t")).owner == "bob"
    await coordinator.delete_topic("t")
    await topic(coordinator, "t", None)
    assert await coordinator.get_acl("t") == {}, "a deleted topic's grants go with it"


@pytest.mark.asyncio
async def test_deleting_a_user_who_owns_topics(coordinator: Coordinator):
    for name in ("alice", "bob", "carol"):
        await coordinator.create_user(user(name))
    await topic(coordinator, "a1", "alice")
    await topic(coordinator, "a2", "alice")
    await topic(coordinator, "b1", "bob")
    await coordinator.set_acl("b1", "alice", READ)
    await coordinator.set_acl("b1", "carol", WRITE)
    with pytest.raises(UserOwnsTopicsError) as refused:
        await coordinator.delete_user("alice")
    assert refused.value.extra["topics"] == ["a1", "a2"]
    with pytest.raises(UnknownUserError):
        await coordinator.delete_user("alice", reassign_to="alice")
    with pytest.raises(UnknownUserError):
        await coordinator.delete_user("alice", reassign_to="nobody")
    assert await coordinator.find_user("alice") is not None, "a refused deletion changes nothing"
    assert await coordinator.delete_user("alice", reassign_to="carol") == ["a1", "a2"]
    assert await coordinator.find_user("alice") is None
    assert [(t.name, t.owner) for t in await coordinator.list_topics()] == [("a1", "carol"), ("a2", "carol"),
                                                                             ("b1", "bob")]
    assert await coordinator.get_acl("b1") == {"carol": WRITE}


@pytest.mark.asyncio
async def test_group_records(coordinator: Coordinator):
    for name in ("alice", "bob", "carol"):
        await coordinator.create_user(user(name))
    claimed = await coordinator.claim_group("g", "alice")
    assert claimed.owner == "alice" and (await coordinator.claim_group("g", "bob")) == claimed, "the first claim holds"
    await coordinator.set_group_acl("g", "bob", READ)
    with pytest.raises(UnknownGroupRecordError):
        await coordinator.set_group_acl("unclaimed", "bob", READ)
    with pytest.raises(UnknownUserError):
        await coordinator.set_group_acl("g", "nobody", READ)
    await coordinator.claim_group("gone", "bob")
    await coordinator.delete_group("gone")
    await coordinator.delete_group("never")
    assert [g.name for g in await coordinator.list_group_records()] == ["g"]
    assert await coordinator.get_group("g") == GroupRecord("g", "alice", {"bob": READ}, claimed.created_ms)
    await coordinator.delete_user("bob")
    await coordinator.delete_user("alice", reassign_to="carol")
    assert await coordinator.get_group("g") == GroupRecord("g", "carol", {}, claimed.created_ms)
    assert await coordinator.get_group("gone") is None


@pytest.mark.asyncio
async def test_usage_records(coordinator: Coordinator):
    """A node's record of an hour replaces its earlier one; reads select hours; retention drops
    whole hours before a bound (decision 0298)."""
    hour = 3_600_000
    await coordinator.put_usage(10 * hour, 1, [["alice", "t", 1, 1, 0, 0, 1, 0, 0]])
    await coordinator.put_usage(10 * hour, 1, [["alice", "t", 5, 2, 0, 0, 2, 0, 0]])
    await coordinator.put_usage(10 * hour, 2, [["bob", "u", 7, 1, 0, 0, 1, 0, 0]])
    await coordinator.put_usage(11 * hour, 1, [["alice", "t", 3, 1, 0, 0, 1, 0, 0]])
    found = sorted(await coordinator.usage_between(10 * hour, 11 * hour))
    assert found == [(10 * hour, 1, [["alice", "t", 5, 2, 0, 0, 2, 0, 0]]),
                     (10 * hour, 2, [["bob", "u", 7, 1, 0, 0, 1, 0, 0]])]
    assert [h for h, _, _ in await coordinator.usage_between(0, 12 * hour)] == [10 * hour, 10 * hour, 11 * hour]
    assert await coordinator.usage_between(11 * hour + 1, 20 * hour) == []
    await coordinator.drop_usage_before(11 * hour)
    assert [(h, n) for h, n, _ in await coordinator.usage_between(0, 12 * hour)] == [(11 * hour, 1)]
