"""The node's internal RPC service (``logbroker.Node``) and the rule for when it is served.

With authentication on, the internal RPC is served only behind mutual TLS and a cluster token:
a single node with the embedded coordinator and no TLS configured serves no RPC at all (nothing
needs it), and a clustered node without TLS refuses to start. With authentication off
(development) it is served, with TLS and a token only if configured.

Methods: ``Ping`` -> ``{node_id}``; ``Fetch {topic, partition, offset, max_bytes}`` -> ``{data,
next_offset, high_watermark}`` (whole batches below the high watermark, as the HTTP fetch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from internal_rpc.security import TlsFiles
from internal_rpc.server import Method
from logbroker.config import NodeConfig
from logbroker.errors import InvalidRequestError
from logbroker.storage_usage import RPC_METHOD as STORAGE_RPC_METHOD

if TYPE_CHECKING:
    from logbroker.node import Node

SERVICE: Final = "logbroker.Node"
FETCH_BYTES_MAX: Final = 16 * 1024 * 1024
PARTITIONS_PER_CALL_MAX: Final = 1024


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


def _field(request: dict[str, Any], name: str, kind: type) -> Any:
    value = request.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidRequestError(f"{name} must be {kind.__name__}")
    return value


def _partitions(request: dict[str, Any]) -> list[int]:
    value = request.get("partitions")
    if not isinstance(value, list) or len(value) > PARTITIONS_PER_CALL_MAX \
            or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
        raise InvalidRequestError(f"partitions must be a list of at most {PARTITIONS_PER_CALL_MAX} integers")
    return value


def node_service(node: Node) -> dict[str, Method]:
    """The calls one node makes on another: forwarded produce, fetch and offsets (served only by
    the partition's leader, never forwarded again), partition figures for describe, and the
    bytes stored per payer in the partitions this node leads (the storage quota's sums)."""

    async def ping(request: dict[str, Any]) -> dict[str, Any]:
        return {"node_id": node.config.node_id}

    async def produce(request: dict[str, Any]) -> dict[str, Any]:
        topic, partition = _field(request, "topic", str), _field(request, "partition", int)
        batch, acks = _field(request, "batch", bytes), _field(request, "acks", str)
        node.check_topic_id(topic, request.get("topic_id"))
        answer = await node.produce_local_batch(topic, partition, batch, acks)
        return {"base_offset": answer[0]["offset"]}

    async def fetch(request: dict[str, Any]) -> dict[str, Any]:
        topic, partition = _field(request, "topic", str), _field(request, "partition", int)
        offset, max_bytes = _field(request, "offset", int), _field(request, "max_bytes", int)
        wait_ms = request.get("wait_ms", 0)
        if offset < 0 or not 0 < max_bytes <= FETCH_BYTES_MAX or not isinstance(wait_ms, int) or wait_ms < 0:
            raise InvalidRequestError(f"offset and wait_ms must be >= 0 and max_bytes in [1, {FETCH_BYTES_MAX}]")
        node.check_topic_id(topic, request.get("topic_id"))
        serve = node.fetch_replica if request.get("replica") is True else node.fetch_local
        result, high_watermark = await serve(topic, partition, offset, max_bytes, wait_ms)
        return {"data": bytes(result.data), "first_offset": result.first_offset, "next_offset": result.next_offset,
                "high_watermark": high_watermark}

    async def list_offset(request: dict[str, Any]) -> dict[str, Any]:
        topic, partition = _field(request, "topic", str), _field(request, "partition", int)
        return node.list_local_offset(topic, partition, _field(request, "at", str))

    async def partition_figures(request: dict[str, Any]) -> dict[str, Any]:
        figures = node.local_figures(_field(request, "topic", str), _partitions(request))
        return {"figures": {str(p): f for p, f in figures.items()}}

    async def freeze(request: dict[str, Any]) -> dict[str, Any]:
        topic, partition = _field(request, "topic", str), _field(request, "partition", int)
        ttl_s = request.get("ttl_s")
        if not isinstance(ttl_s, (int, float)) or isinstance(ttl_s, bool):
            raise InvalidRequestError("ttl_s must be a number")
        return await node.moves.freeze(topic, partition, float(ttl_s))

    async def thaw(request: dict[str, Any]) -> dict[str, Any]:
        node.moves.thaw(_field(request, "topic", str), _field(request, "partition", int))
        return {}

    async def replicate(request: dict[str, Any]) -> dict[str, Any]:
        try:
            return await node.replication.replicate(request)
        except ValueError as exc:
            raise InvalidRequestError(f"bad shipment: {exc}") from exc

    async def storage_by_payer(request: dict[str, Any]) -> dict[str, Any]:
        return node.storage.answer()

    return {"Ping": ping, "Replicate": replicate, "Produce": produce, "Fetch": fetch, "ListOffset": list_offset,
            "PartitionFigures": partition_figures, "Freeze": freeze, "Thaw": thaw,
            STORAGE_RPC_METHOD: storage_by_payer}
