"""Health, readiness, metrics, cluster view and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from http_api.auth import principal_of
from http_api.keys import NODE
from http_api.openapi import openapi_document
from http_api.routing import route


@route("GET", "/healthz", "Liveness: the process answers", access="public")
async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@route("GET", "/readyz", "Readiness: logs are open, the node serves, its disk takes writes and no partition "
       "is offline (``storage`` says which), and a cluster node's coordinator session is live", access="public",
       responses={"200": "Ready", "503": "Not ready: starting, stopping, a full disk or an offline partition"})
async def readyz(request: web.Request) -> web.Response:
    node = request.app[NODE]
    storage = node.storage_state()
    session = node.coordinator.session_alive()
    ready = node.ready and session and not storage["full"] and not storage["offline_partitions"]
    return web.json_response({"ready": ready, "serving": node.ready, "coordinator": {"session_alive": session},
                              "storage": storage}, status=200 if ready else 503)


@route("GET", "/metrics", "Prometheus metrics (text format): the node's metrics_token or an admin's token as "
       "bearer, unless the node runs with metrics_public", access="metrics",
       responses={"200": "OK", "401": "No or wrong credential", "403": "Not an admin"})
async def metrics(request: web.Request) -> web.Response:
    body = request.app[NODE].metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@route("GET", "/v1/cluster", "Nodes, liveness, partition placement and leaders", access="user")
async def cluster(request: web.Request) -> web.Response:
    return web.json_response(await request.app[NODE].cluster(principal_of(request)))


@route("GET", "/v1/openapi.json", "This document", access="public")
async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())
