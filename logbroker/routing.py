"""Where a call is served: by this node, or by which other. The one router the write path, the
read path, the HTTP pass-on, the gRPC group subscriptions and the Kafka listener share
(``Node.router``, decision 0399), answered from the coordinator's cache without I/O or await.

``Router.locate(target)`` takes what a call is about and says ``Here`` or ``There(node)``:

- ``PartitionTarget(topic, partition)``: the partition's leader (a single node serves all);
- ``GROUPS`` (``GroupTarget``): the node that coordinates every consumer group, the leader of
  ``__consumer_offsets``/0 (``logbroker.cluster_groups``);
- ``QueueTarget(name)``: the node a queue lives on, the leader of its partition 0
  (``logbroker.queue_hosting``); a queue with no known home is answered here, where the queue
  manager refuses it (unknown, or retriably while its leadership moves).

Refusals are the typed, retriable ones each lookup always gave: ``NoLeaderError`` (no leader now, a
leader or coordinator not alive in the cache, the group coordinator still starting here),
``UnknownTopicError``, ``UnknownPartitionError``.

Two steps are kept out of ``locate``, and why:

- ``__consumer_offsets`` is created by the first group call a cluster receives: that is I/O (etcd,
  a wait for its leader), so it is ``cluster_groups.ensure_offsets_topic``, which a caller that
  may make that first call awaits before ``locate(GROUPS)``. Before it, ``locate(GROUPS)``
  refuses with the retriable "no leader now".
- Produce and fetch ask ``leader(topic, partition)``, the node id ``locate`` builds its answer on:
  internal RPC forwards by node id (``peers`` looks the address up and refuses a node that is not
  alive), and the hot path allocates no target and no answer.
- While this node loads the groups it was just made to coordinate, ``locate(GROUPS)`` refuses;
  a group call that would be served here waits for them instead (``locate_groups``,
  ``while_groups_start``: awaited, bounded by ``GROUPS_START_WAIT_S``), so a cluster's first
  group call is answered rather than refused.

Invariant: the answer is "here" for a partition only when its log is open on this node, and
``leader`` first takes up a leadership the cache gives this node at an epoch the replication has
not reached yet (the cache moved ahead of the reconcile rounds), so a write is never served at a
stale epoch; "here" for groups only while this node's group coordinator is running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

from coordinator.errors import UnknownTopicError
from coordinator.models import NodeInfo, TopicMetadata
from logbroker.cluster_groups import OFFSETS_TOPIC
from logbroker.errors import NoLeaderError, NotAvailableError, NotLeaderError, UnknownPartitionError
from logbroker.partition_roles import NO_LEADER

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.peers import Peers
    from logbroker.replica_manager import ReplicaManager
    from logbroker.replication.manager import ReplicationManager


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionTarget:
    """A call about one partition: served by its leader."""

    topic: str
    partition: int


@dataclasses.dataclass(frozen=True, slots=True)
class GroupTarget:
    """A consumer-group call: every group is coordinated by one node (``GROUPS``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueTarget:
    """A call about a queue: served by the node it lives on."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Here:
    """Serve the call on this node (``HERE``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class There:
    """Pass the call on to ``node``, alive in this node's cache."""

    node: NodeInfo


Target = PartitionTarget | GroupTarget | QueueTarget
Location = Here | There
GROUPS: Final = GroupTarget()
HERE: Final = Here()
GROUPS_START_WAIT_S: Final = 5.0  # how long a group call waits for the groups this node is loading
GROUPS_START_POLL_S: Final = 0.05
GROUPS_START_TRIES_MAX: Final = 200  # a bound on the polls whatever the clock says
T = TypeVar("T")


class Router:
    """Takes the coordinator (its cache), the replicas open here, the replication (to take up a
    leadership), this node's id, ``peers``: the node's ``Peers`` once it has them (None before
    a cluster node starts, or on a single node), and ``hosts_groups``: whether this node's group
    coordinator is running."""

    def __init__(self, coordinator: Coordinator, replicas: ReplicaManager, replication: ReplicationManager,
                 node_id: int, peers: Callable[[], Peers | None], hosts_groups: Callable[[], bool]) -> None:
        self._coordinator = coordinator
        self._replicas = replicas
        self._replication = replication
        self._node_id = node_id
        self._peers = peers
        self._hosts_groups = hosts_groups

    def locate(self, target: Target) -> Location:
        """Where the call about ``target`` is served: ``HERE`` (a single node: always), or
        ``There(node)``. Refusals as the module docstring says."""
        if not self._coordinator.is_cluster:
            return HERE
        if isinstance(target, PartitionTarget):
            leader = self.leader(target.topic, target.partition)
            return HERE if leader is None else There(self._alive(leader, f"node {leader} is not alive", node=leader))
        if isinstance(target, QueueTarget):
            return self._queue_home(target.name)
        return self._group_coordinator()

    def groups_starting_here(self) -> bool:
        """Whether this node is about to coordinate the groups: the cache names it the leader of
        ``__consumer_offsets``/0, its lease is valid, and it has not loaded them yet (a cluster's
        first group call, or the first after the coordinator moved here). ``locate(GROUPS)``
        refuses retriably meanwhile; ``locate_groups`` waits instead, bounded."""
        state = self._coordinator.cached_partition(OFFSETS_TOPIC, 0)
        return state is not None and state.leader == self._node_id and not self._hosts_groups() \
            and time.monotonic() < self._coordinator.lease_valid_until()

    def _group_coordinator(self) -> Location:
        state = self._coordinator.cached_partition(OFFSETS_TOPIC, 0)
        if state is None or state.leader == NO_LEADER:
            raise NoLeaderError("the group coordinator has no leader now; retry")
        if state.leader == self._node_id:
            if not self._hosts_groups():
                raise NoLeaderError("the group coordinator is starting on this node; retry")
            return HERE
        return There(self._alive(state.leader, f"the group coordinator's node {state.leader} is not alive; retry"))

    def _queue_home(self, name: str) -> Location:
        state = self._coordinator.cached_partition(name, 0)
        if state is None or state.leader in (NO_LEADER, self._node_id):
            return HERE  # unknown, or no home now: the queue manager here answers
        return There(self._alive(state.leader, f"the node queue {name!r} lives on ({state.leader}) is not alive; "
                                               "retry"))

    def _alive(self, node_id: int, refusal: str, **extra: int) -> NodeInfo:
        """Node ``node_id`` as the cache holds it; ``NoLeaderError(refusal)`` when it is not alive
        (the words each lookup always gave: a partition's are ``peers``' for a call to it)."""
        info = self._coordinator.cached_node(node_id)
        if info is None:
            raise NoLeaderError(refusal, **extra)
        return info

    def leader(self, topic: str, partition: int) -> int | None:
        """None when this node serves ``partition`` itself, else the id of the node leading it
        (``NoLeaderError`` when none does now, ``UnknownPartitionError``). The produce and fetch
        paths' lookup, which ``locate`` shares."""
        if not self._coordinator.is_cluster:
            return None
        state = self._coordinator.cached_partition(topic, partition)
        if state is None:
            count = self.partition_count(topic)
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition}", partitions=count)
        if state.leader == NO_LEADER:
            raise NoLeaderError(f"partition {partition} of {topic!r} has no leader now (an election is due)")
        if state.leader != self._node_id:
            return state.leader
        if not self._replicas.hosts(topic, partition):
            raise NoLeaderError(f"partition {partition} of {topic!r} is being opened on its leader")
        leadership = self._replication.leadership(topic, partition)
        if leadership is None or leadership.epoch != state.leader_epoch:
            self._replication.reconcile_partition(state)  # the cache moved ahead of the reconcile rounds
        return None

    def check_leads(self, topic: str, partition: int) -> None:
        """For a forwarded call: this node must lead the partition now (no second hop)."""
        if self.leader(topic, partition) is not None:
            raise NotLeaderError(f"node {self._node_id} does not lead partition {partition} of {topic!r}")

    def cached_meta(self, topic: str) -> TopicMetadata:
        meta = self._coordinator.cached_topic(topic)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return meta

    def partition_count(self, topic: str) -> int:
        if not self._coordinator.is_cluster:
            return self._replicas.count(topic)
        return self.cached_meta(topic).partitions

    def topic_id(self, topic: str) -> str:
        return self.cached_meta(topic).topic_id

    def check_topic_id(self, topic: str, topic_id: object) -> None:
        """A forwarded call names the topic by id too: a leader whose topic of that name is another
        one (deleted and created again, one of the two caches behind) refuses it, retriably."""
        if topic_id is not None and self.topic_id(topic) != topic_id:
            raise NoLeaderError(f"the nodes disagree on which topic {topic!r} is (it was deleted and created "
                                "again); retry once the metadata settles")

    def peers(self) -> Peers:
        """The node's ``Peers``; ``NotAvailableError`` while it has none (starting or stopping)."""
        peers = self._peers()
        if peers is None:
            raise NotAvailableError("the node is not serving (starting or stopping)")
        return peers

    def has_peers(self) -> bool:
        return self._peers() is not None


async def while_groups_start(router: Router, attempt: Callable[[], T], *, wait_s: float = GROUPS_START_WAIT_S,
                             clock: Callable[[], float] = time.monotonic,
                             sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> T:
    """``attempt()``, tried again every ``GROUPS_START_POLL_S`` while it is refused
    (``NoLeaderError``) because this node is loading the groups it was just made to coordinate
    (``Router.groups_starting_here``), for at most ``wait_s``: the call that created the offsets
    topic, or the first after the coordinator moved here, is served once they are loaded instead
    of refused. Any other refusal, or one past the bound, stands."""
    deadline = clock() + wait_s
    for _ in range(GROUPS_START_TRIES_MAX):
        try:
            return attempt()
        except NoLeaderError:
            if clock() >= deadline or not router.groups_starting_here():
                raise
        await sleep(GROUPS_START_POLL_S)
    return attempt()


async def locate_groups(router: Router) -> Location:
    """``router.locate(GROUPS)``, waiting while the groups start here (``while_groups_start``)."""
    return await while_groups_start(router, lambda: router.locate(GROUPS))
