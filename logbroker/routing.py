"""Where a partition is served: by this node, or by which other. A cluster node serves the
partitions it leads and forwards the rest; a single node serves all. The one lookup the write
path, the read path and the node share (``Node.routing``), answered from the coordinator's cache
without I/O or await.

Invariant: ``leader`` says "here" only for a partition whose log is open on this node, and first
takes up a leadership the cache gives this node at an epoch the replication has not reached yet
(the cache moved ahead of the reconcile rounds), so a write is never served at a stale epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from coordinator.errors import UnknownTopicError
from coordinator.models import TopicMetadata
from logbroker.errors import NoLeaderError, NotAvailableError, NotLeaderError, UnknownPartitionError
from logbroker.partition_roles import NO_LEADER

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.peers import Peers
    from logbroker.replica_manager import ReplicaManager
    from logbroker.replication.manager import ReplicationManager


class Routing:
    """Takes the coordinator (its cache), the replicas open here, the replication (to take up a
    leadership), this node's id, and ``peers``: the node's ``Peers`` once it has them (None before
    a cluster node starts, or on a single node)."""

    def __init__(self, coordinator: Coordinator, replicas: ReplicaManager, replication: ReplicationManager,
                 node_id: int, peers: Callable[[], Peers | None]) -> None:
        self._coordinator = coordinator
        self._replicas = replicas
        self._replication = replication
        self._node_id = node_id
        self._peers = peers

    def cached_meta(self, topic: str) -> TopicMetadata:
        meta = self._coordinator.cached_topic(topic)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return meta

    def partition_count(self, topic: str) -> int:
        if not self._coordinator.is_cluster:
            return self._replicas.count(topic)
        return self.cached_meta(topic).partitions

    def leader(self, topic: str, partition: int) -> int | None:
        """None when this node serves ``partition`` itself, else the id of the node leading it
        (``NoLeaderError`` when none does now, ``UnknownPartitionError``)."""
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
