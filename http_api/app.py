"""The aiohttp application: routes from the table, middlewares, body limit, lifecycle.

Middlewares run outermost first: request id + access log + metrics, then error mapping, then (a
cluster node) passing group and queue calls on to the node that serves them, then authentication,
authorization and quotas (so their refusals are mapped like any error), then the bounded read of
the request body (``http_api.bodies``). The app is
frozen by aiohttp when it starts serving; resources (the sendfile and decode threads) go through
``cleanup_ctx`` so they are released in reverse order even when start-up fails half way.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from aiohttp import web

from http_api import (  # noqa: F401  (registers the routes)
    console,
    groups,
    ops,
    produce_stream,
    queues,
    records,
    streams,
    subscribe_stream,
    topics,
    usage,
    users,
)
from http_api.auth import auth_middleware
from http_api.bodies import body_deadline_middleware
from http_api.decoding import decode_pool
from http_api.errors import Handler, error_middleware
from http_api.keys import EXECUTOR, FRONT_DOOR, NODE, SENDFILE, STREAMS
from http_api.pass_on import forwarder, pass_on_middleware
from http_api.routing import ROUTES
from http_api.sendfile import SendfileGate
from http_api.stream_budget import StreamBudget
from logbroker.api import BrokerApi
from logbroker.logs import request_id
from logbroker.node import Node

log = logging.getLogger("logbroker.http")
SENDFILE_THREADS: Final = 8
REQUEST_ID_HEADER: Final = "X-Request-Id"


@web.middleware
async def observe_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    rid = request.headers.get(REQUEST_ID_HEADER) or os.urandom(8).hex()
    token = request_id.set(rid)
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        response.headers[REQUEST_ID_HEADER] = rid
        return response
    finally:
        elapsed = time.perf_counter() - started
        resource = request.match_info.route.resource
        route_name = resource.canonical if resource is not None else "unmatched"
        metrics = request.app[NODE].metrics
        metrics.requests.labels(request.method, route_name, str(status)).inc()
        metrics.latency.labels(request.method, route_name).observe(elapsed)
        if status >= 500 or log.isEnabledFor(logging.DEBUG):
            log.log(logging.ERROR if status >= 500 else logging.DEBUG, "request", extra={"fields": {
                "method": request.method, "path": request.path, "status": status, "ms": round(elapsed * 1000, 3)}})
        request_id.reset(token)


async def _sendfile_threads(app: web.Application) -> AsyncIterator[None]:
    executor = ThreadPoolExecutor(max_workers=SENDFILE_THREADS, thread_name_prefix="logbroker-sendfile")
    app[EXECUTOR] = executor
    app[SENDFILE] = SendfileGate(executor, SENDFILE_THREADS)
    yield
    executor.shutdown(wait=True)


def build_app(node: Node) -> web.Application:
    app = web.Application(client_max_size=node.config.request_body_bytes_max,
                          middlewares=[observe_middleware, error_middleware, pass_on_middleware, auth_middleware,
                                       body_deadline_middleware])
    app[NODE] = node
    app[FRONT_DOOR] = BrokerApi(node)
    app[STREAMS] = StreamBudget()
    app.cleanup_ctx.append(_sendfile_threads)
    app.cleanup_ctx.append(decode_pool)
    if node.clustered:
        app.cleanup_ctx.append(forwarder)
    for r in ROUTES:
        app.router.add_route(r.method, r.path, r.handler)
    return app
