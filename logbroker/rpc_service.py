"""The node's internal RPC service (``logbroker.Node``) and the rule for when it is served.

With authentication on, the internal RPC is served only behind mutual TLS and a cluster token:
a single node with the embedded coordinator and no TLS configured serves no RPC at all (nothing
needs it), and a clustered node without TLS refuses to start. With authentication off
(development) it is served, with TLS and a token only if configured.

Methods and their messages: ``internal_rpc.messages`` (one table, ``METHODS``). ``Fetch`` answers
whole batches below the high watermark, as the HTTP fetch does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from internal_rpc.messages import (
    FetchAnswer,
    FetchRequest,
    FreezeAnswer,
    FreezeRequest,
    ListOffsetAnswer,
    ListOffsetRequest,
    PartitionFiguresAnswer,
    PartitionFiguresRequest,
    PingAnswer,
    PingRequest,
    ProduceAnswer,
    ProduceRequest,
    ReplicateAnswer,
    ReplicateRequest,
    StorageByPayerAnswer,
    StorageByPayerRequest,
    ThawAnswer,
    ThawRequest,
    bind,
)
from internal_rpc.security import TlsFiles
from internal_rpc.server import Method
from logbroker.config import NodeConfig
from logbroker.errors import InvalidRequestError

if TYPE_CHECKING:
    from logbroker.partition_moves import PartitionMover
    from logbroker.ports import LeaderReads, LeaderWrites, TopicIds
    from logbroker.replication.manager import ReplicationManager
    from logbroker.storage_usage import StorageUsage

SERVICE: Final = "logbroker.Node"


def rpc_security(config: NodeConfig) -> tuple[bool, TlsFiles | None, str | None]:
    """Whether to serve RPC, with which TLS files and which cluster token."""
    tls = TlsFiles(config.rpc_tls_ca_file, config.rpc_tls_cert_file, config.rpc_tls_key_file) \
        if config.rpc_tls_ca_file else None
    token = config.cluster_token or None
    if config.auth == "off":
        return True, tls, token
    if tls is None:
        if config.coordinator != "local":
            raise InvalidRequestError("configuration: with auth on, a cluster's internal RPC needs mutual TLS "
                                      "(rpc_tls_ca_file, rpc_tls_cert_file, rpc_tls_key_file; see logbroker certs)")
        return False, None, None
    if token is None:
        raise InvalidRequestError("configuration: with auth on, the internal RPC needs cluster_token as well")
    return True, tls, token


def node_service(node_id: int, topic_ids: TopicIds, writes: LeaderWrites, reads: LeaderReads, moves: PartitionMover,
                 replication: ReplicationManager, storage: StorageUsage) -> dict[str, Method]:
    """The calls one node makes on another: forwarded produce, fetch and offsets (served only by
    the partition's leader, never forwarded again), partition figures for describe, the moves'
    freeze and thaw, shipments, and the bytes stored per payer in the partitions this node leads
    (the storage quota's sums). Each body is decoded into its request type first
    (``messages.bind``): a malformed one is answered ``invalid_request`` and changes nothing.
    ``topic_ids``, ``writes``, ``reads``: the node's routing, write path and read path, which
    serve the partitions it leads."""

    async def ping(request: PingRequest) -> PingAnswer:
        return PingAnswer(node_id=node_id)

    async def produce(request: ProduceRequest) -> ProduceAnswer:
        topic_ids.check_topic_id(request.topic, request.topic_id)
        answer = await writes.produce_local_batch(request.topic, request.partition, request.batch, request.acks)
        return ProduceAnswer(base_offset=answer[0]["offset"])

    async def fetch(request: FetchRequest) -> FetchAnswer:
        topic_ids.check_topic_id(request.topic, request.topic_id)
        serve = reads.fetch_replica if request.replica else reads.fetch_local
        result, high_watermark = await serve(request.topic, request.partition, request.offset, request.max_bytes,
                                             request.wait_ms)
        return FetchAnswer(data=bytes(result.data), first_offset=result.first_offset, next_offset=result.next_offset,
                           high_watermark=high_watermark)

    async def list_offset(request: ListOffsetRequest) -> ListOffsetAnswer:
        answer = reads.list_local_offset(request.topic, request.partition, request.at)
        return ListOffsetAnswer(partition=request.partition, offset=answer["offset"])

    async def partition_figures(request: PartitionFiguresRequest) -> PartitionFiguresAnswer:
        return PartitionFiguresAnswer(figures=reads.local_figures(request.topic, request.partitions))

    async def freeze(request: FreezeRequest) -> FreezeAnswer:
        return FreezeAnswer(log_end=await moves.freeze(request.topic, request.partition, request.ttl_s))

    async def thaw(request: ThawRequest) -> ThawAnswer:
        moves.thaw(request.topic, request.partition)
        return ThawAnswer()

    async def replicate(request: ReplicateRequest) -> ReplicateAnswer:
        return await replication.replicate(request)

    async def storage_by_payer(request: StorageByPayerRequest) -> StorageByPayerAnswer:
        return storage.answer()

    return bind({"Ping": ping, "Replicate": replicate, "Produce": produce, "Fetch": fetch, "ListOffset": list_offset,
                 "PartitionFigures": partition_figures, "Freeze": freeze, "Thaw": thaw,
                 "StorageByPayer": storage_by_payer})
