"""``Router.locate``: where a partition's, the consumer groups' and a queue's calls are served, over
a fake coordinator cache (every branch: here, there, no leader, a dead node, unknown topic or
partition, a queue's home, the group coordinator starting), and ``ensure_offsets_topic``, the
first group call's creation of ``__consumer_offsets`` that ``locate`` leaves out."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, cast

import pytest

from coordinator.errors import TopicExistsError, UnknownTopicError
from coordinator.models import NodeInfo, PartitionState, TopicMetadata, TopicSpec
from logbroker.cluster_groups import OFFSETS_TOPIC, ensure_offsets_topic
from logbroker.errors import NoLeaderError, NotLeaderError, UnknownPartitionError
from logbroker.partition_roles import NO_LEADER
from logbroker.routing import (
    GROUPS,
    GROUPS_START_POLL_S,
    HERE,
    Here,
    PartitionTarget,
    QueueTarget,
    Router,
    There,
    while_groups_start,
)

ME, OTHER, GONE = 1, 2, 3
INFO = {ME: NodeInfo(ME, "http://n1", "n1:1"), OTHER: NodeInfo(OTHER, "http://n2", "n2:1")}  # GONE: not alive


def _topic(name: str, partitions: int, kind: str = "topic") -> TopicMetadata:
    return TopicMetadata(name, f"id-{name}", partitions, 3, cast(Any, kind), {}, None, 0)


@dataclasses.dataclass
class FakeCache:
    """The coordinator as the router reads it: its cache, and what creating a topic does."""

    is_cluster: bool = True
    topics: dict[str, TopicMetadata] = dataclasses.field(default_factory=dict)
    states: dict[tuple[str, int], PartitionState] = dataclasses.field(default_factory=dict)
    created: list[TopicSpec] = dataclasses.field(default_factory=list)
    exists: bool = False  # another node created it first
    lease_until: float = float("inf")  # monotonic seconds

    def lease_valid_until(self) -> float:
        return self.lease_until

    def lead(self, topic: str, partition: int, leader: int, epoch: int = 4) -> None:
        self.states[(topic, partition)] = PartitionState(topic, partition, (ME, OTHER, GONE), (ME, OTHER), leader,
                                                         epoch)

    def cached_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def cached_partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.states.get((topic, partition))

    def cached_node(self, node_id: int) -> NodeInfo | None:
        return INFO.get(node_id)

    async def nodes(self) -> list[NodeInfo]:
        return list(INFO.values())

    async def create_topic(self, spec: TopicSpec, owner: str | None) -> None:
        self.created.append(spec)
        if self.exists:
            raise TopicExistsError(spec.name)


@dataclasses.dataclass
class FakeReplicas:
    open: set[tuple[str, int]] = dataclasses.field(default_factory=set)

    def hosts(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.open

    def count(self, topic: str) -> int:
        return 7


@dataclasses.dataclass
class FakeReplication:
    epochs: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    reconciled: list[PartitionState] = dataclasses.field(default_factory=list)

    def leadership(self, topic: str, partition: int) -> Any:
        epoch = self.epochs.get((topic, partition))
        return None if epoch is None else type("Leadership", (), {"epoch": epoch})()

    def reconcile_partition(self, state: PartitionState) -> None:
        self.reconciled.append(state)


@dataclasses.dataclass
class Setup:
    cache: FakeCache = dataclasses.field(default_factory=FakeCache)
    replicas: FakeReplicas = dataclasses.field(default_factory=FakeReplicas)
    replication: FakeReplication = dataclasses.field(default_factory=FakeReplication)
    groups_running: bool = True

    def router(self) -> Router:
        return Router(cast(Any, self.cache), cast(Any, self.replicas), cast(Any, self.replication), ME,
                      lambda: None, lambda: self.groups_running)


@pytest.fixture
def setup() -> Setup:
    s = Setup()
    s.cache.topics["t"] = _topic("t", 3)
    return s


# ---- partitions ----------------------------------------------------------------------------------


def test_a_single_node_serves_everything_here() -> None:
    s = Setup(FakeCache(is_cluster=False))
    router = s.router()
    for target in (PartitionTarget("anything", 9), GROUPS, QueueTarget("q")):
        assert router.locate(target) is HERE
    assert router.leader("anything", 9) is None and router.partition_count("anything") == 7


def test_a_partition_led_here_with_its_log_open_is_served_here(setup: Setup) -> None:
    setup.cache.lead("t", 0, ME, epoch=4)
    setup.replicas.open.add(("t", 0))
    setup.replication.epochs[("t", 0)] = 4
    assert setup.router().locate(PartitionTarget("t", 0)) == Here()
    assert setup.replication.reconciled == []


def test_a_leadership_the_cache_gives_ahead_of_the_replication_is_taken_up_first(setup: Setup) -> None:
    setup.cache.lead("t", 0, ME, epoch=5)
    setup.replicas.open.add(("t", 0))
    setup.replication.epochs[("t", 0)] = 4
    assert setup.router().locate(PartitionTarget("t", 0)) is HERE
    assert [s.leader_epoch for s in setup.replication.reconciled] == [5]


def test_a_partition_led_here_whose_log_is_not_open_yet_has_no_leader(setup: Setup) -> None:
    setup.cache.lead("t", 0, ME)
    with pytest.raises(NoLeaderError, match="being opened on its leader"):
        setup.router().locate(PartitionTarget("t", 0))
    with pytest.raises(NoLeaderError):  # a forwarded call too: retriable, not "not the leader"
        setup.router().check_leads("t", 0)


def test_a_partition_led_elsewhere_is_there_on_its_leader(setup: Setup) -> None:
    setup.cache.lead("t", 1, OTHER)
    router = setup.router()
    assert router.locate(PartitionTarget("t", 1)) == There(INFO[OTHER])
    assert router.leader("t", 1) == OTHER  # the produce and fetch paths' lookup: the same answer, by id
    with pytest.raises(NotLeaderError):
        router.check_leads("t", 1)


def test_a_partition_without_a_leader_or_led_by_a_dead_node_is_refused_retriably(setup: Setup) -> None:
    setup.cache.lead("t", 0, NO_LEADER)
    setup.cache.lead("t", 1, GONE)
    router = setup.router()
    with pytest.raises(NoLeaderError, match="has no leader now") as no_leader:
        router.locate(PartitionTarget("t", 0))
    with pytest.raises(NoLeaderError, match=f"node {GONE} is not alive") as dead:  # peers' words for a call to it
        router.locate(PartitionTarget("t", 1))
    assert no_leader.value.retriable and dead.value.extra == {"node": GONE}
    assert router.leader("t", 1) == GONE  # forwarding asks peers, which refuse the dead node the same way


def test_an_unknown_partition_or_topic_is_refused(setup: Setup) -> None:
    router = setup.router()
    with pytest.raises(UnknownPartitionError) as unknown:
        router.locate(PartitionTarget("t", 3))
    assert unknown.value.extra == {"partitions": 3}
    with pytest.raises(UnknownTopicError):
        router.locate(PartitionTarget("nope", 0))


# ---- queues --------------------------------------------------------------------------------------


def test_a_queue_lives_on_the_leader_of_its_partition_0(setup: Setup) -> None:
    setup.cache.lead("q", 0, ME)
    setup.cache.lead("r", 0, OTHER)
    setup.cache.lead("s", 0, GONE)
    router = setup.router()
    assert router.locate(QueueTarget("q")) is HERE  # no log check: the queue manager answers here
    assert router.locate(QueueTarget("r")) == There(INFO[OTHER])
    with pytest.raises(NoLeaderError, match=r"the node queue 's' lives on \(3\) is not alive; retry") as dead:
        router.locate(QueueTarget("s"))
    assert dead.value.extra == {}


def test_a_queue_without_a_home_now_is_answered_here(setup: Setup) -> None:
    setup.cache.lead("q", 0, NO_LEADER)
    router = setup.router()
    assert router.locate(QueueTarget("q")) is HERE  # the queue manager refuses it retriably
    assert router.locate(QueueTarget("unknown")) is HERE  # and an unknown queue with a 404


# ---- the group coordinator -----------------------------------------------------------------------


def test_groups_are_coordinated_here_or_there(setup: Setup) -> None:
    setup.cache.lead(OFFSETS_TOPIC, 0, ME)
    assert setup.router().locate(GROUPS) is HERE
    setup.cache.lead(OFFSETS_TOPIC, 0, OTHER)
    assert setup.router().locate(GROUPS) == There(INFO[OTHER])


def test_a_group_coordinator_starting_here_dead_or_missing_is_refused_retriably(setup: Setup) -> None:
    router = setup.router()
    with pytest.raises(NoLeaderError, match="the group coordinator has no leader now; retry"):
        router.locate(GROUPS)  # before ensure_offsets_topic created the offsets topic
    setup.cache.lead(OFFSETS_TOPIC, 0, NO_LEADER)
    with pytest.raises(NoLeaderError, match="the group coordinator has no leader now; retry"):
        router.locate(GROUPS)
    setup.cache.lead(OFFSETS_TOPIC, 0, ME)
    setup.groups_running = False
    with pytest.raises(NoLeaderError, match="the group coordinator is starting on this node; retry"):
        router.locate(GROUPS)
    setup.cache.lead(OFFSETS_TOPIC, 0, GONE)
    with pytest.raises(NoLeaderError, match=f"the group coordinator's node {GONE} is not alive; retry") as dead:
        router.locate(GROUPS)
    assert dead.value.extra == {}


# ---- the offsets topic on first use --------------------------------------------------------------


class Leaders:
    def __init__(self) -> None:
        self.awaited: list[str] = []

    async def await_leaders(self, name: str) -> None:
        self.awaited.append(name)


def test_the_first_group_call_creates_the_offsets_topic_and_waits_for_its_leader() -> None:
    cache, leaders = FakeCache(), Leaders()
    asyncio.run(ensure_offsets_topic(cast(Any, cache), leaders))
    assert [(s.name, s.partitions, s.replication_factor) for s in cache.created] == [(OFFSETS_TOPIC, 1, 2)]
    assert leaders.awaited == [OFFSETS_TOPIC]
    cache.exists = True  # another node created it between our look and our create
    asyncio.run(ensure_offsets_topic(cast(Any, cache), leaders))
    assert leaders.awaited == [OFFSETS_TOPIC, OFFSETS_TOPIC]


def test_the_offsets_topic_is_not_created_again_nor_on_a_single_node() -> None:
    cache, leaders = FakeCache(), Leaders()
    cache.topics[OFFSETS_TOPIC] = _topic(OFFSETS_TOPIC, 1)
    asyncio.run(ensure_offsets_topic(cast(Any, cache), leaders))
    single = FakeCache(is_cluster=False)
    asyncio.run(ensure_offsets_topic(cast(Any, single), leaders))
    assert cache.created == single.created == [] and leaders.awaited == []


class Clock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def test_a_group_call_waits_while_the_groups_start_here_then_is_served(setup: Setup) -> None:
    setup.cache.lead(OFFSETS_TOPIC, 0, ME)
    setup.groups_running = False
    clock = Clock()

    async def load_after_three_polls(seconds: float) -> None:
        await Clock.sleep(clock, seconds)
        setup.groups_running = clock.sleeps >= 3

    router = setup.router()
    where = asyncio.run(while_groups_start(router, lambda: router.locate(GROUPS), clock=clock,
                                           sleep=load_after_three_polls))
    assert where is HERE and clock.sleeps == 3


def test_a_group_call_waits_no_longer_than_its_bound(setup: Setup) -> None:
    setup.cache.lead(OFFSETS_TOPIC, 0, ME)
    setup.groups_running = False
    clock, router = Clock(), setup.router()
    with pytest.raises(NoLeaderError, match="starting on this node"):
        asyncio.run(while_groups_start(router, lambda: router.locate(GROUPS), wait_s=1.0, clock=clock,
                                       sleep=clock.sleep))
    assert 1.0 <= clock.now <= 1.0 + GROUPS_START_POLL_S


@pytest.mark.parametrize("why", ["another node leads", "no leader", "lease lapsed"])
def test_other_refusals_of_a_group_call_are_not_waited_out(setup: Setup, why: str) -> None:
    setup.groups_running = False
    setup.cache.lead(OFFSETS_TOPIC, 0, {"another node leads": GONE, "no leader": NO_LEADER}.get(why, ME))
    if why == "lease lapsed":  # a node cut from etcd whose cache still names it
        setup.cache.lease_until = time.monotonic() - 1
    clock, router = Clock(), setup.router()
    with pytest.raises(NoLeaderError):
        asyncio.run(while_groups_start(router, lambda: router.locate(GROUPS), clock=clock, sleep=clock.sleep))
    assert clock.sleeps == 0
