"""Consumer groups on a cluster: one group coordinator, on the leader of ``__consumer_offsets``.

A cluster keeps every group on one node: ``__consumer_offsets`` has one partition there,
created by the first group call any node receives (``ensure_offsets_topic``) and placed (and
replicated) like any topic; the node that leads it replays it and coordinates every group
(``routing.Router.locate(GROUPS)`` finds it), and the other nodes pass group calls to it
(``http_api.pass_on``). The coordinator moves with that partition's leadership: offsets are
written with ``acks=all`` semantics (``Replica.commit_replicated``), so the new leader replays them
all after a failover. (DESIGN §6 spreads groups over offsets partitions; one partition keeps one
coordinator until a benchmark asks for more.) Its groups read their topics through the node, so
records and offsets of partitions led elsewhere are forwarded like any fetch.

Invariant: a node has a ``GroupCoordinator`` only while it leads ``__consumer_offsets``/0 and
its log is open; it drops it (members rejoin elsewhere) the moment its cache says otherwise.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

from coordinator.errors import TopicExistsError, UnknownTopicError
from coordinator.models import TopicSpec
from logbroker.errors import UnknownPartitionError
from logbroker.internal_log import INTERNAL_LOG_CONFIG, InternalLog
from logbroker.ports import LeaderWait, LocalReplicas, MetadataView, PartitionReads

if TYPE_CHECKING:
    from coordinator.base import Coordinator

log = logging.getLogger(__name__)
OFFSETS_TOPIC: Final = "__consumer_offsets"
CLUSTER_OFFSETS_PARTITIONS: Final = 1
# Committed offsets on three replicas where there are three nodes: with the default
# min_insync_replicas (2 at three replicas) an acknowledged commit survives the loss of any one
# node, power loss of the sole in-sync replica included (decision 0396; Kafka's
# offsets.topic.replication.factor is 3 too).
OFFSETS_REPLICATION_FACTOR: Final = 3


class ClusterTopics:
    """A cluster node's view of the topics its groups consume (``groups.coordinator.TopicView``)."""

    def __init__(self, metadata: MetadataView, reads: PartitionReads) -> None:
        self._metadata = metadata
        self._reads = reads

    def partition_count(self, topic: str) -> int:
        meta = self._metadata.cached_topic(topic)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return meta.partitions

    def high_watermark(self, topic: str, partition: int) -> int | None:
        count = self.partition_count(topic)
        if not 0 <= partition < count:
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition}", partitions=count)
        return self._reads.local_high_watermark(topic, partition)

    async def offset_at(self, topic: str, partition: int, at: str) -> int | None:
        return (await self._reads.list_offset(topic, partition, at))["offset"]


async def ensure_offsets_topic(coordinator: Coordinator, topics: LeaderWait) -> None:
    """Create ``__consumer_offsets`` on a cluster's first group call and wait (bounded, as
    ``await_leaders`` waits) for its leader; nothing when the cache has it already, or on a single
    node. The I/O step ``Router.locate(GROUPS)`` leaves out: a caller that may make the first group
    call awaits this first."""
    if not coordinator.is_cluster or coordinator.cached_topic(OFFSETS_TOPIC) is not None:
        return
    replication = min(OFFSETS_REPLICATION_FACTOR, len(await coordinator.nodes()))
    spec = TopicSpec(OFFSETS_TOPIC, CLUSTER_OFFSETS_PARTITIONS, replication or None, "topic", INTERNAL_LOG_CONFIG)
    with contextlib.suppress(TopicExistsError):
        await coordinator.create_topic(spec, None)
    await topics.await_leaders(OFFSETS_TOPIC)


def offsets_log(metadata: MetadataView, replicas: LocalReplicas, node_id: int) -> InternalLog | None:
    """The offsets log if node ``node_id`` (this one) leads ``__consumer_offsets``/0 with its log
    open, else None."""
    state = metadata.cached_partition(OFFSETS_TOPIC, 0)
    if state is None or state.leader != node_id or not replicas.hosts(OFFSETS_TOPIC, 0):
        return None
    return InternalLog(replicas.partitions(OFFSETS_TOPIC))
