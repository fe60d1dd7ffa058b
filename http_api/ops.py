"""Health, readiness, metrics, cluster view and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from http_api.auth import principal_of, scrape_allowed
from http_api.json_codec import json_response
from http_api.keys import NODE
from http_api.openapi import openapi_document
from http_api.params import read_json
from http_api.routing import route
from logbroker.errors import BrokerError, InvalidRequestError
from logbroker.node import Node

DECOMMISSION_BODY = {"type": "object", "required": ["node_id"], "properties": {"node_id": {"type": "integer"}}}


@route("GET", "/healthz", "Liveness: the process answers", access="public")
async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


@route("GET", "/readyz", "Readiness: logs are open, the node serves, its disk takes writes and no partition "
       "is offline, and a cluster node's coordinator session is live. Anyone gets the bare status; the scrape "
       "credential or an admin's token also gets why (``storage`` names offline partitions; ``coordinator`` "
       "is local, or etcd with this node's session)", access="public",
       responses={"200": "Ready", "503": "Not ready: starting, stopping, a full disk or an offline partition"})
async def readyz(request: web.Request) -> web.Response:
    node = request.app[NODE]
    storage = node.storage_state()
    session = node.coordinator.session_alive()
    ready = node.ready and session and not storage["full"] and not storage["offline_partitions"]
    status = 200 if ready else 503
    if not await _sees_details(request):
        return json_response({"ready": ready}, status=status)
    return json_response({"ready": ready, "serving": node.ready, "coordinator": coordinator_state(node),
                          "storage": storage}, status=status)


def coordinator_state(node: Node) -> dict[str, object]:
    """What coordinates this node, and (etcd only: a single node's own coordinator holds no session
    and cannot lose one) whether its session is live."""
    if node.coordinator_kind == "local":
        return {"kind": "local"}
    return {"kind": node.coordinator_kind, "session_alive": node.coordinator.session_alive()}


async def _sees_details(request: web.Request) -> bool:
    """An operator's view (topic names, storage) for the scrape credential or an admin, not for anyone."""
    if scrape_allowed(request):
        return True
    try:
        principal, _ = await request.app[NODE].auth.authenticate(request.headers.get("Authorization"))
    except BrokerError:
        return False
    return principal.is_admin


@route("GET", "/metrics", "Prometheus metrics (text format): the node's metrics_token or an admin's token as "
       "bearer, unless the node runs with metrics_public", access="metrics",
       responses={"200": "OK", "401": "No or wrong credential", "403": "Not an admin"})
async def metrics(request: web.Request) -> web.Response:
    body = request.app[NODE].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@route("GET", "/v1/cluster", "Nodes, liveness, the coordinator (local or etcd), the placement and leaders of "
       "the partitions the caller may see, and counts of those (topics and partitions as GET /v1/topics lists "
       "them, the internal ones apart)", access="user")
async def cluster(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].cluster(principal_of(request)))


@route("POST", "/v1/cluster/rebalance", "Spread the topics' partitions evenly over the live nodes (admin): "
       "each moved partition's data is copied to its new leader before leadership moves", access="admin",
       responses={"200": "The moves made", "403": "Not an admin", "409": "Not a cluster: nothing to rebalance",
                  "503": "A move failed"})
async def rebalance(request: web.Request) -> web.Response:
    return json_response(await request.app[NODE].rebalance(None))


@route("POST", "/v1/cluster/decommission", "Move every partition off one node (admin), e.g. before "
       "retiring it", access="admin", body=DECOMMISSION_BODY,
       responses={"200": "The moves made", "400": "Bad node id", "403": "Not an admin",
                  "409": "Not a cluster: nothing to move"})
async def decommission(request: web.Request) -> web.Response:
    body = await read_json(request)
    node_id = body.get("node_id") if isinstance(body, dict) else None
    if isinstance(node_id, bool) or not isinstance(node_id, int) or node_id < 0 or set(body) != {"node_id"}:
        raise InvalidRequestError('the body must be {"node_id": <a node id>}')
    return json_response(await request.app[NODE].rebalance(node_id))


@route("GET", "/v1/openapi.json", "This document", access="public")
async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document())
