"""The etcd coordinator against a real etcd: several coordinators (node ids) share one cluster
prefix and see each other's membership, topics, leadership and grants through their watches."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aetcd
import pytest
import pytest_asyncio

from coordinator.cache import Entry
from coordinator.errors import (
    CoordinatorError,
    CoordinatorUnavailableError,
    InvalidTopicError,
    StaleEpochError,
    TopicExistsError,
    UnknownTopicError,
    UserExistsError,
)
from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import EtcdClient, parse_etcd_url
from coordinator.etcd_keys import encode, lock_key
from coordinator.models import ClusterNode, MetadataChange, NodeInfo, TopicMetadata, TopicSpec
from coordinator.users import UserRecord
from segments.config import LogConfig
from tests.support.etcd import EtcdServer, free_port

TTL_MS = 2000
WATCH_BOUND_S = 5.0
_clusters = itertools.count()

Factory = Callable[..., Awaitable[EtcdCoordinator]]


def node(node_id: int, rack: str | None = None) -> NodeInfo:
    return NodeInfo(node_id, f"http://127.0.0.1:{8000 + node_id}", f"127.0.0.1:{9000 + node_id}", rack,
                    f"127.0.0.1:{7000 + node_id}", 1)


def spec(name: str, partitions: int = 1, replication: int | None = None) -> TopicSpec:
    body: dict[str, Any] = {"name": name, "partitions": partitions}
    if replication is not None:
        body["replication_factor"] = replication
    return TopicSpec.parse(body, base_config=LogConfig())


def live(coordinator: EtcdCoordinator, count: int) -> bool:
    """``coordinator``'s cache shows nodes 1..count alive."""
    return all(coordinator.cached_node(i) is not None for i in range(1, count + 1))


async def eventually(predicate: Callable[[], Any], what: str, timeout_s: float = WATCH_BOUND_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


async def retrying(call: Callable[[], Awaitable[Any]], timeout_s: float = 10.0) -> Any:
    """``call()`` until it does not raise ``CoordinatorUnavailableError`` (as a client retries a
    retriable error), e.g. while the channel reconnects after an etcd restart."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await call()
        except CoordinatorUnavailableError:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.05)


@pytest_asyncio.fixture(loop_scope="function")
async def make(etcd_server: EtcdServer) -> AsyncIterator[Factory]:
    """Start coordinators on one fresh cluster prefix; every one is closed after the test."""
    cluster = f"test{next(_clusters)}-{time.monotonic_ns()}"
    started: list[EtcdCoordinator] = []

    async def start(node_id: int, rack: str | None = None, server: EtcdServer = etcd_server,
                    **options: Any) -> EtcdCoordinator:
        coordinator = EtcdCoordinator(parse_etcd_url(server.url), cluster, node(node_id, rack), TTL_MS, **options)
        await coordinator.start()
        started.append(coordinator)
        return coordinator

    yield start
    for coordinator in started:
        await coordinator.close()


# ---- membership ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_membership_close_and_crash_are_seen_by_the_others(make):
    a, b, c = await make(1, "r1"), await make(2, "r2"), await make(3)
    assert a.is_cluster and a.session_alive() and a.lease_valid_until() > time.monotonic()
    await eventually(lambda: live(a, 3), "three live nodes")
    assert [n.node_id for n in await b.nodes()] == [1, 2, 3]
    assert a.cached_node(2) == node(2, "r2")
    changes: list[MetadataChange] = []
    a.on_change(lambda change: 1 / 0)  # a failing listener is logged; the others still hear
    a.on_change(changes.append)

    await b.close()
    assert not b.session_alive()
    await eventually(lambda: a.cached_node(2) is None, "the closed node seen dead")
    assert any(ch.nodes for ch in changes)
    closed_at = time.monotonic()
    await c.close(revoke=False)  # a crash: the lease lapses by itself
    await eventually(lambda: a.cached_node(3) is None, "the crashed node seen dead", timeout_s=TTL_MS / 1000 + 3)
    assert time.monotonic() - closed_at >= 0.5, "a crashed node stays registered until its lease lapses"
    assert await a.cluster_nodes() == [ClusterNode(node(1, "r1"), True), ClusterNode(node(2, "r2"), False),
                                       ClusterNode(node(3), False)]
    await b.close()  # idempotent


@pytest.mark.asyncio
async def test_a_second_process_with_the_same_node_id_is_refused(make):
    await make(1)
    started = time.monotonic()
    with pytest.raises(CoordinatorError, match="already registered"):
        await make(1)
    assert time.monotonic() - started < TTL_MS / 1000 + 5


@pytest.mark.asyncio
async def test_a_restart_after_a_crash_takes_the_id_back(make):
    first = await make(4)
    await first.close(revoke=False)
    again = await make(4)
    assert again.session_alive() and again.cached_node(4) == node(4)


@pytest.mark.asyncio
async def test_an_unreachable_etcd_fails_start_within_a_bound():
    url = f"etcd://127.0.0.1:{free_port()}"
    coordinator = EtcdCoordinator(parse_etcd_url(url), "nowhere", node(1), TTL_MS)
    started = time.monotonic()
    with pytest.raises(CoordinatorUnavailableError, match=url):
        await coordinator.start()
    assert time.monotonic() - started < 15
    assert not coordinator.session_alive()


@pytest.mark.asyncio
async def test_the_lease_survives_a_busy_event_loop(make):
    a = await make(1)
    lost: list[MetadataChange] = []
    a.on_change(lambda ch: lost.append(ch) if ch.session_lost else None)
    deadline = time.monotonic() + 3 * TTL_MS / 1000
    while time.monotonic() < deadline:
        hog_until = time.monotonic() + 0.1  # the loop is blocked 100 ms at a time, with 5 ms breaks
        while time.monotonic() < hog_until:
            pass
        await asyncio.sleep(0.005)
    assert not lost and a.session_alive()


# ---- topics ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_topics_are_placed_and_seen_by_every_node(make):
    a, b, c = await make(1), await make(2), await make(3)
    await eventually(lambda: live(b, 3), "three live nodes")
    changes: list[MetadataChange] = []
    b.on_change(changes.append)
    meta = await a.create_topic(spec("t", 6), owner="alice")
    assert meta.replication_factor == 2, "the default replication factor is min(2, live nodes)"
    assert await a.get_topic("t") == meta, "the writer reads its own write"
    assert await eventually(lambda: b.cached_topic("t"), "the topic on another node") == meta
    assert any("t" in ch.topics for ch in changes)
    states = await b.partition_states("t")
    assert [s.partition for s in states] == list(range(6))
    for s in states:
        assert len(set(s.replicas)) == 2 and s.isr == s.replicas and s.leader == -1 and s.leader_epoch == 0
    preferred = [s.replicas[0] for s in states]
    assert {preferred.count(n) for n in (1, 2, 3)} == {2}, "preferred leaders spread evenly"
    with pytest.raises(TopicExistsError):
        await c.create_topic(spec("t"), owner=None)
    with pytest.raises(InvalidTopicError):
        await c.create_topic(spec("wide", replication=4), owner=None)
    assert c.cached_topic("wide") is None

    grown = await b.add_partitions("t", 9)
    assert grown.partitions == 9 and grown.topic_id == meta.topic_id
    await eventually(lambda: (a.cached_topic("t") or meta).partitions == 9, "the new partitions elsewhere")
    assert [s.replicas for s in await a.partition_states("t")][:6] == [s.replicas for s in states]
    with pytest.raises(InvalidTopicError):
        await a.add_partitions("t", 9)
    assert [t.name for t in await c.list_topics()] == ["t"]

    assert await c.delete_topic("t") == grown
    await eventually(lambda: a.cached_topic("t") is None and b.cached_topic("t") is None, "the deletion")
    with pytest.raises(UnknownTopicError):
        await a.partition_states("t")
    with pytest.raises(UnknownTopicError):
        await a.delete_topic("t")
    again = await b.create_topic(spec("t", 2, replication=1), owner=None)
    assert again.topic_id != meta.topic_id
    await eventually(lambda: a.cached_topic("t") == again, "the recreated topic elsewhere")
    assert [len(s.replicas) for s in await a.partition_states("t")] == [1, 1]


@pytest.mark.asyncio
async def test_topics_larger_than_one_transaction(make):
    a, b = await make(1), await make(2)
    await eventually(lambda: live(a, 2), "two live nodes")
    meta = await a.create_topic(spec("big", 300), owner=None)
    states = await a.partition_states("big")
    assert len(states) == 300 and all(len(s.replicas) == 2 for s in states)
    await eventually(lambda: b.cached_partition("big", 299), "the last partition elsewhere")
    grown = await b.add_partitions("big", 1024)
    assert grown.partitions == 1024 and len(await b.partition_states("big")) == 1024
    assert all(s.replicas for s in await b.partition_states("big"))
    assert a._cache.entry(lock_key("big")) is None, "the write lock is released"
    await a.delete_topic("big")
    await eventually(lambda: b.cached_topic("big") is None, "the deletion elsewhere")
    again = await b.create_topic(spec("big", 200), owner=None)
    assert again.topic_id != meta.topic_id
    assert all(s.replicas for s in await b.partition_states("big"))
    await eventually(lambda: a.cached_topic("big") == again, "the recreated topic elsewhere")
    assert a.cached_partition("big", 250) is None


# ---- leadership ------------------------------------------------------------------------------


async def three_nodes_with_topic(make: Factory, partitions: int, replication: int) -> dict[int, EtcdCoordinator]:
    """Three live coordinators, each with topic ``t`` in its cache; by node id."""
    a, b, c = await make(1), await make(2), await make(3)
    await eventually(lambda: live(a, 3), "three live nodes")
    await a.create_topic(spec("t", partitions, replication=replication), owner=None)
    await eventually(lambda: b.cached_topic("t") and c.cached_topic("t"), "the topic everywhere")
    return {1: a, 2: b, 3: c}


@pytest.mark.asyncio
async def test_elections_epochs_isr_and_reassignment(make):
    coordinators = await three_nodes_with_topic(make, 3, 2)
    a = coordinators[1]
    state = a.cached_partition("t", 0)
    assert state is not None
    first, second = state.replicas
    leader, follower = coordinators[first], coordinators[second]
    outsider = coordinators[({1, 2, 3} - {first, second}).pop()]

    assert state.isr == state.replicas, "a new partition's replicas are all in sync (their logs are empty)"
    won = await leader.elect("t", 0)
    assert won is not None and won.leader == first and won.leader_epoch == 1
    assert leader.cached_partition("t", 0) == won
    assert await leader.elect("t", 0) is None, "a second election for a led partition loses"
    seen = await eventually(lambda: follower.cached_partition("t", 0), "the leader elsewhere")
    await eventually(lambda: follower.cached_partition("t", 0).leader == first, "the leader elsewhere")
    assert seen.leader_epoch == 1

    shrunk = await leader.set_isr("t", 0, 1, (first,))
    assert shrunk.isr == (first,)
    await leader.resign("t", 0)
    await eventually(lambda: follower.cached_partition("t", 0) == dataclasses.replace(shrunk, leader=-1),
                     "the shrunk ISR and the resignation elsewhere")
    assert await follower.elect("t", 0) is None, "a replica outside the ISR cannot stand"
    again = await leader.elect("t", 0)
    assert again is not None and again.leader_epoch == 2
    await eventually(lambda: follower.cached_partition("t", 0).leader_epoch == 2, "the new epoch elsewhere")

    grown = await leader.set_isr("t", 0, 2, (first, second))
    assert grown.isr == (first, second)
    with pytest.raises(StaleEpochError):
        await leader.set_isr("t", 0, 1, (first,))
    with pytest.raises(StaleEpochError):
        await follower.set_isr("t", 0, 2, (second,))
    with pytest.raises(InvalidTopicError):
        await leader.set_isr("t", 0, 2, (first, outsider.node_id))

    await leader.resign("t", 0)
    await eventually(lambda: follower.cached_partition("t", 0).leader == -1, "the resignation elsewhere")
    await follower.resign("t", 0)  # not the leader: nothing to do
    taken = await follower.elect("t", 0)
    assert taken is not None and taken.leader == second and taken.leader_epoch == 3, "the epoch moves on"
    with pytest.raises(StaleEpochError):
        await leader.set_isr("t", 0, 2, (first,))

    moved = await outsider.reassign("t", 0, (outsider.node_id, second))
    assert moved.replicas == (outsider.node_id, second) and moved.isr == (second,), "the ISR keeps remaining replicas"
    moved = await outsider.reassign("t", 0, (outsider.node_id,))
    assert moved.isr == (second,), "the ISR is never empty: it keeps the current leader"
    with pytest.raises(InvalidTopicError):
        await a.reassign("t", 0, (1, 1))
    with pytest.raises(InvalidTopicError):
        await a.reassign("t", 0, (99,))
    await eventually(lambda: a.cached_partition("t", 0).replicas == (outsider.node_id,), "the reassignment")


@pytest.mark.asyncio
async def test_eligible_leader_replicas_stand_when_the_isr_is_gone_and_an_unclean_restart_withdraws(make):
    coordinators = await three_nodes_with_topic(make, 1, 3)
    first, second, third = coordinators[1].cached_partition("t", 0).replicas
    leader, keeper, other = coordinators[first], coordinators[second], coordinators[third]
    assert await leader.elect("t", 0) is not None

    with pytest.raises(InvalidTopicError, match="ELR"):
        await leader.set_isr("t", 0, 1, (first,), (first,))
    with pytest.raises(InvalidTopicError, match="ELR"):
        await leader.set_isr("t", 0, 1, (first,), (second, second))
    with pytest.raises(CoordinatorError, match="changed meanwhile"):
        await leader.set_isr("t", 0, 1, (first,), (second,), based_on=((first, second), ()))
    with pytest.raises(CoordinatorError, match="changed meanwhile"):
        await leader.set_isr("t", 0, 1, (first,), (second,), based_on=((first, second, third), (second,)))
    assert leader.cached_partition("t", 0).isr == (first, second, third), "a change from a stale view writes nothing"
    shrunk = await leader.set_isr("t", 0, 1, (first,), (second,), based_on=((first, second, third), ()))
    assert (shrunk.isr, shrunk.elr) == ((first,), (second,))
    await eventually(lambda: keeper.cached_partition("t", 0).elr == (second,), "the ELR elsewhere")
    assert await other.withdraw("t", 0) is None, "neither in the ISR nor in the ELR: nothing changes"
    left = await keeper.withdraw("t", 0)
    assert left is not None and (left.isr, left.elr) == ((first,), ()), "an ELR member that restarted leaves it"
    await eventually(lambda: leader.cached_partition("t", 0).elr == (), "the withdrawal on the leader")
    await leader.set_isr("t", 0, 1, (first,), (second,))
    await eventually(lambda: keeper.cached_partition("t", 0).elr == (second,), "the ELR again elsewhere")

    await leader.resign("t", 0)
    await eventually(lambda: keeper.cached_partition("t", 0).leader == -1, "the resignation elsewhere")
    assert await keeper.elect("t", 0) is None, "an ELR member does not stand while a member of the ISR is alive"
    assert await other.elect("t", 0) is None, "neither in the ISR nor in the ELR"

    withdrawn = await leader.withdraw("t", 0)  # the leader restarted after an unclean shutdown
    assert withdrawn is not None and (withdrawn.isr, withdrawn.elr) == ((second,), ()), \
        "the ISR never empties: the ELR takes the withdrawn replica's place"
    await eventually(lambda: keeper.cached_partition("t", 0).isr == (second,), "the withdrawal elsewhere")
    won = await keeper.elect("t", 0)
    assert won is not None and won.leader == second and won.leader_epoch == 2

    back = await keeper.set_isr("t", 0, 2, (second,), (first,))
    await eventually(lambda: leader.cached_partition("t", 0) == back, "the ELR on the old leader")
    await keeper.close(revoke=True)  # the only member of the ISR is gone
    await eventually(lambda: leader.cached_partition("t", 0).leader == -1 and leader.cached_node(second) is None,
                     "the leader gone")
    taken = await leader.elect("t", 0)
    assert taken is not None and (taken.isr, taken.elr, taken.leader_epoch) == ((first,), (second,), 3), \
        "an ELR member leads alone; the old ISR member stays eligible"
    assert await leader.withdraw("t", 0) is not None, "it leaves while another stays eligible"
    await eventually(lambda: other.cached_partition("t", 0).isr == (second,), "the withdrawal elsewhere")


@pytest.mark.asyncio
async def test_a_leadership_ends_with_its_lease(make):
    a, b = await make(1), await make(2)
    await eventually(lambda: live(a, 2), "two live nodes")
    await a.create_topic(spec("t", 1, replication=2), owner=None)
    state = a.cached_partition("t", 0)
    leader, other = (a, b) if state.replicas[0] == 1 else (b, a)
    await eventually(lambda: leader.cached_topic("t"), "the topic on the leader")
    assert await leader.elect("t", 0) is not None
    await eventually(lambda: other.cached_partition("t", 0).leader == leader.node_id, "the leader elsewhere")
    await leader.close(revoke=False)
    after = await eventually(lambda: other.cached_partition("t", 0).leader == -1 and other.cached_partition("t", 0),
                             "the leader key gone with the lease", timeout_s=TTL_MS / 1000 + 3)
    assert after.leader_epoch == 1, "the epoch survives the lease"


# ---- etcd failures ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_watches_and_sessions_resume_after_an_etcd_restart(own_etcd, make):
    a, b = await make(1, server=own_etcd), await make(2, server=own_etcd)
    await eventually(lambda: live(a, 2), "two live nodes")
    await a.create_topic(spec("before", 1, replication=1), owner=None)
    await eventually(lambda: b.cached_topic("before"), "the first topic elsewhere")
    placed = a.cached_partition("before", 0)
    leader = {1: a, 2: b}[placed.replicas[0]]
    await eventually(lambda: leader.cached_topic("before"), "the topic on its replica")
    assert await leader.elect("before", 0) is not None
    lost: list[MetadataChange] = []
    a.on_change(lambda ch: lost.append(ch) if ch.session_lost else None)

    own_etcd.kill()
    await eventually(lambda: not a.session_alive() and not b.session_alive(), "the sessions lost while etcd is down",
                     timeout_s=TTL_MS / 1000 + 2)
    await eventually(lambda: lost, "listeners told that the session is lost", timeout_s=1)
    assert b.cached_topic("before") is not None, "reads go on from the cache"
    with pytest.raises(CoordinatorUnavailableError):
        await b.create_topic(spec("during"), owner=None)
    await asyncio.to_thread(own_etcd.start)

    await eventually(lambda: a.session_alive() and b.session_alive(), "both sessions back", timeout_s=15)
    await retrying(lambda: b.create_topic(spec("after", 1, replication=1), owner=None))
    await eventually(lambda: a.cached_topic("after"), "a change after the restart seen elsewhere")
    await eventually(lambda: a.cached_node(2) and b.cached_node(1), "both nodes registered again", timeout_s=10)
    after = await eventually(lambda: leader.cached_partition("before", 0).leader == -1
                             and leader.cached_partition("before", 0), "the lost session's leadership gone")
    assert after.leader_epoch == 1
    again = await leader.elect("before", 0)
    assert again is not None and again.leader_epoch == 2, "the new session stands again, one epoch on"


@pytest.mark.asyncio
async def test_a_lost_session_goes_on_over_a_new_connection_and_its_watch_with_it(own_etcd, make):
    """A session lost (here: etcd paused past the lease) is granted again on a new connection
    (``EtcdClient.reconnect``); the watch taken from the old one moves with it and the cache
    goes on seeing changes, and writes go through."""
    clients: list[EtcdClient] = []

    def client_factory(endpoints: Any, access: Any) -> EtcdClient:
        clients.append(EtcdClient(endpoints, access=access))
        return clients[-1]

    a = await make(1, server=own_etcd, client_factory=client_factory)
    b = await make(2, server=own_etcd)
    await eventually(lambda: live(a, 2) and live(b, 2), "two live nodes")
    assert own_etcd.proc is not None
    os.kill(own_etcd.proc.pid, signal.SIGSTOP)
    try:
        await eventually(lambda: not a.session_alive(), "the session lost", timeout_s=TTL_MS / 1000 + 2)
    finally:
        os.kill(own_etcd.proc.pid, signal.SIGCONT)
    await eventually(lambda: a.session_alive() and b.session_alive(), "both sessions back", timeout_s=10)
    assert clients[0].connections >= 2
    await retrying(lambda: b.create_topic(spec("seen-after", 1, replication=1), owner=None))
    await eventually(lambda: a.cached_topic("seen-after"), "a change seen through the moved watch")
    await retrying(lambda: a.create_topic(spec("written-after", 1, replication=1), owner=None))
    await eventually(lambda: b.cached_topic("written-after"), "a write over the new connection")


@pytest.mark.asyncio
async def test_a_write_returns_once_the_cache_has_its_revision_even_when_nothing_of_ours_changed(make, etcd_server):
    a = await make(1)
    await a.create_user(UserRecord("u", "user", "h", 0))
    async with aetcd.Client(*etcd_server.endpoint.split(":")) as other:
        for i in range(5):
            await other.put(f"/elsewhere/{i}".encode(), b"x")  # the store moves on outside our prefix
        store_revision = (await other.get(b"/elsewhere/4")).mod_revision
    with pytest.raises(UserExistsError):
        await a.create_user(UserRecord("u", "user", "h", 0))
    assert a._cache.revision >= store_revision, "a progress notification brought the cache up to the store"


@pytest.mark.asyncio
async def test_a_compacted_watch_reloads_and_reports_the_difference(own_etcd, make):
    a, b = await make(1, server=own_etcd), await make(2, server=own_etcd)
    await b.create_topic(spec("kept", 1, replication=1), owner=None)
    await eventually(lambda: a.cached_topic("kept"), "the topic on a")
    ghost = TopicMetadata("ghost", "x", 1, 1, "topic", {}, None, 0)
    a._cache.apply([("topics/ghost", Entry("topics/ghost", encode(ghost.to_json()), 1, 1))], a._cache.revision)
    a._cache.revision = 1  # as if a had been cut off since revision 1
    async with aetcd.Client(*own_etcd.endpoint.split(":")) as other:
        await other.compact((await other.put(b"/elsewhere", b"x")).header.revision)
    changes: list[MetadataChange] = []
    a.on_change(changes.append)
    await asyncio.to_thread(own_etcd.restart)  # the watch breaks and resumes from revision 2, long compacted
    await eventually(lambda: a.cached_topic("ghost") is None, "the reload dropping what etcd no longer has",
                     timeout_s=15)
    assert a.cached_topic("kept") is not None
    assert any("ghost" in ch.topics for ch in changes)
    await retrying(lambda: b.create_topic(spec("later", 1, replication=1), owner=None))
    await eventually(lambda: a.cached_topic("later"), "changes after the reload", timeout_s=10)


@pytest.mark.asyncio
@pytest.mark.parametrize("partitions", [3, 300])
async def test_concurrent_creates_of_one_topic_leave_one_consistent_topic(make, partitions):
    a, b = await make(1), await make(2)
    await eventually(lambda: live(a, 2) and live(b, 2), "two live nodes")
    results = await asyncio.gather(a.create_topic(spec("race", partitions), owner="a"),
                                   b.create_topic(spec("race", partitions), owner="b"), return_exceptions=True)
    winners = [r for r in results if isinstance(r, TopicMetadata)]
    assert len(winners) == 1, results
    assert all(isinstance(r, (TopicExistsError, CoordinatorUnavailableError)) for r in results if r not in winners)
    meta = winners[0]
    for coordinator in (a, b):
        await eventually(lambda c=coordinator: c.cached_topic("race") == meta, "the winner everywhere")
        states = await coordinator.partition_states("race")
        assert len(states) == partitions and all(len(s.replicas) == 2 for s in states), \
            "every partition key belongs to the winning topic id"


@pytest.mark.asyncio
async def test_replicas_land_in_different_racks_when_nodes_give_them(make):
    a = await make(1, "east")
    await make(2, "east")
    await make(3, "west")
    await make(4, "west")
    await eventually(lambda: live(a, 4), "four live nodes")
    meta = await a.create_topic(spec("racked", 8, 2), "alice")
    racks = {1: "east", 2: "east", 3: "west", 4: "west"}
    states = await a.partition_states(meta.name)
    assert len(states) == 8
    for state in states:
        assert {racks[n] for n in state.replicas} == {"east", "west"}, state
    assert sorted(s.replicas[0] for s in states) == [1, 1, 2, 2, 3, 3, 4, 4]


@pytest.mark.asyncio
async def test_a_hand_over_is_guarded_by_the_leader_and_the_replica_list(make):
    a, b = await make(1), await make(2)
    await eventually(lambda: live(a, 2), "two live nodes")
    await a.create_topic(spec("moving", 1, replication=1), owner=None)
    state = a.cached_partition("moving", 0)
    assert state is not None
    owner = {1: a, 2: b}[state.replicas[0]]
    other = 3 - state.replicas[0]
    won = await owner.elect("moving", 0)
    assert won is not None
    interim = (owner.node_id, other)
    await a.reassign("moving", 0, interim)
    await eventually(lambda: b.cached_partition("moving", 0).replicas == interim, "the interim list")
    with pytest.raises(StaleEpochError):  # not the leader named
        await a.hand_over("moving", 0, (other,), (other,), other, expected=interim)
    with pytest.raises(StaleEpochError):  # the list changed since the move read it
        await a.hand_over("moving", 0, (other,), (other,), owner.node_id, expected=(other, owner.node_id))
    assert a.cached_partition("moving", 0).leader == owner.node_id
    await b.hand_over("moving", 0, (other,), (other,), owner.node_id, expected=interim)
    moved = await eventually(lambda: (s := a.cached_partition("moving", 0)) and s.leader == -1 and s,
                             "no leader after the hand-over")
    assert moved.replicas == (other,) and moved.isr == (other,) and moved.leader_epoch == won.leader_epoch
    new_leader = {1: a, 2: b}[other]
    assert (await new_leader.elect("moving", 0)).leader_epoch == won.leader_epoch + 1


@pytest.mark.asyncio
async def test_a_cluster_lock_admits_one_holder_and_goes_with_its_lease(make):
    a, b = await make(1), await make(2)
    async with a.exclusive("rebalance"):
        with pytest.raises(CoordinatorUnavailableError, match="already running"):
            async with b.exclusive("rebalance"):
                pass
        async with b.exclusive("other"):
            pass
    async with b.exclusive("rebalance"):
        pass
    held = a.exclusive("rebalance")
    await held.__aenter__()
    await a.close(revoke=True)  # the holder goes: the lock goes with its lease
    async with asyncio.timeout(10):
        while True:
            try:
                async with b.exclusive("rebalance"):
                    break
            except CoordinatorUnavailableError:
                await asyncio.sleep(0.1)
