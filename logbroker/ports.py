"""The narrow views of a node that its helpers take instead of the whole ``Node`` (decision 0360).

Each port is what one or a few helpers actually use: the coordinator's cached metadata, the calls
to other nodes, the replicas this node hosts, and the handful of node operations a helper calls
back. ``Node`` (the composition root, ``logbroker.node``) satisfies them structurally and hands
itself, or the one collaborator a helper needs (its coordinator, replicas, replication, or one of
its parts: ``Router``, ``WritePath``, ``ReadPath``, ``TopicAdmin``), to each; nothing here names
the node, so no helper imports it and the modules form no import circle (``tests/test_layering.py``).

Invariant: this module imports nothing of the node's helpers (only models, messages and the
replica type they pass around).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from internal_rpc.messages import Answer, Request

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from coordinator.models import NodeInfo, PartitionState, TopicMetadata
    from logbroker.auth.service import AuthService
    from logbroker.config import NodeConfig
    from logbroker.replica_manager import Replica
    from segments.log import LogRead

A = TypeVar("A", bound=Answer)


class MetadataView(Protocol):
    """The coordinator's metadata as this node's cache holds it: lookups without I/O or await
    (``coordinator.base.Coordinator`` has them)."""

    def cached_topic(self, name: str) -> TopicMetadata | None: ...

    def cached_partition(self, topic: str, partition: int) -> PartitionState | None: ...

    def cached_node(self, node_id: int) -> NodeInfo | None: ...


class PeerTransport(Protocol):
    """Typed internal RPC calls to another node by id (``logbroker.peers`` underneath): a
    one-off call, or one over the long-lived stream kept per node and method."""

    async def peer_call(self, node_id: int, request: Request[A], *, deadline_s: float = ...) -> A: ...

    async def peer_stream_call(self, node_id: int, request: Request[A], *, deadline_s: float = ...) -> A: ...


class LocalReplicas(Protocol):
    """The partitions whose logs are open on this node (``replica_manager.ReplicaManager``)."""

    def hosts(self, topic: str, partition: int) -> bool: ...

    def get(self, topic: str, partition: int) -> Replica: ...

    def partitions(self, topic: str) -> list[Replica]: ...

    def all(self) -> list[Replica]: ...


class PartitionReads(Protocol):
    """Where a partition stands as this node serves it: what consumer groups read of the topics
    they consume (``cluster_groups.ClusterTopics``; ``read_path.ReadPath`` has it)."""

    def local_high_watermark(self, topic: str, partition: int) -> int | None: ...

    async def list_offset(self, topic: str, partition: int, at: str) -> dict[str, int | None]: ...


class PartitionHost(Protocol):
    """What the node does with the partitions it hosts when the coordinator's metadata changes
    (``reconciler.Reconciler`` calls it): open, drop, and re-examine groups and queues."""

    def topic_changed(self, topic: str) -> None: ...

    async def open_hosted(self, meta: TopicMetadata, partitions: list[int]) -> None: ...

    async def drop_local_topic(self, name: str, topic_id: str) -> None: ...

    def local_partitions(self, topic: str) -> list[int]: ...

    async def drop_moved(self, topic: str, partitions: list[int]) -> None: ...

    async def reconcile_groups(self) -> None: ...

    async def reconcile_queues(self) -> None: ...


class TopicIds(Protocol):
    """The check a leader makes on a forwarded call that names its topic by id too
    (``routing.Router`` has it)."""

    def check_topic_id(self, topic: str, topic_id: object) -> None: ...


class LeaderWrites(Protocol):
    """The forwarded produce a partition's leader serves to the other nodes (``rpc_service.node_service``;
    ``write_path.WritePath`` has it)."""

    async def produce_local_batch(self, topic: str, partition: int, batch: bytes,
                                  acks: str) -> list[dict[str, int]]: ...


class LeaderReads(Protocol):
    """What a partition's leader (or an in-sync replica) serves to the other nodes
    (``rpc_service.node_service``; ``read_path.ReadPath`` has it): forwarded fetch and offsets, and
    the figures a describe gathers."""

    async def fetch_replica(self, topic: str, partition: int, offset: int, max_bytes: int,
                            wait_ms: int) -> tuple[LogRead, int]: ...

    async def fetch_local(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int) -> tuple[LogRead, int]: ...

    def list_local_offset(self, topic: str, partition: int, at: str) -> dict[str, int | None]: ...

    def local_figures(self, topic: str, partitions: list[int]) -> dict[int, dict[str, float]]: ...


class LeaderWait(Protocol):
    """Waiting (bounded) until a new topic's partitions have leaders (``topic_admin.TopicAdmin``;
    ``cluster_groups.ensure_offsets_topic`` waits on it)."""

    async def await_leaders(self, name: str) -> None: ...


class TopicCreation(Protocol):
    """The one way to create a topic (``topic_admin.TopicAdmin``)."""

    async def create_topic(self, body: object, *, owner: str | None = None) -> dict[str, Any]: ...


class TopicCreator(Protocol):
    """A node as creation on first use sees it (``first_use``): its settings, metadata, auth,
    and its topic administration (the one way to create a topic)."""

    @property
    def config(self) -> NodeConfig: ...

    @property
    def coordinator(self) -> Coordinator: ...

    @property
    def auth(self) -> AuthService: ...

    @property
    def topics(self) -> TopicCreation: ...
