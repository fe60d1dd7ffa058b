"""On a cluster, consumer-group calls go to the node that coordinates groups
(``logbroker.cluster_groups``, decision 0197) and a queue's calls to the node the queue lives on
(decision 0198), as the node's router locates them (``Router.locate``, decision 0399): any other
node passes the HTTP request on to it as it came (method, path, query, headers with the caller's
token, body) and streams its answer back, push streams included. The caller is authenticated here
first (every group and queue route needs one: a forged token costs no wait and no call to a peer;
``auth_middleware`` takes the caller found here); the receiving node authenticates again and
authorizes the call (tokens and grants hold cluster-wide). A request passed on once is marked and never passed on
again (no loops); the body is read within ``body_timeout_ms``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

import aiohttp
from aiohttp import web

from http_api.auth import LIMITS, PRINCIPAL
from http_api.errors import Handler
from http_api.identity import FORWARDED_FOR, client_address
from http_api.keys import FORWARDER, NODE
from http_api.tls import node_client_context
from logbroker.cluster_groups import ensure_offsets_topic
from logbroker.errors import ForwardOutcomeUnknownError, NoLeaderError, NotAvailableError, RequestTimeoutError
from logbroker.routing import GROUPS, Here, QueueTarget, Target, locate_groups

FORWARDED: Final = "X-Logbroker-Forwarded"
GROUP_PREFIX: Final = "/v1/groups"
QUEUE_PREFIX: Final = "/v1/queues/"
HOP_HEADERS: Final = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host",
                                "upgrade", "te", "trailer", "proxy-authorization", "proxy-connection"})
CONNECT_TIMEOUT_S: Final = 5.0
CHUNK_BYTES: Final = 64 * 1024


@web.middleware
async def pass_on_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    node = request.app[NODE]
    if not node.clustered or FORWARDED in request.headers:
        return await handler(request)
    target: Target
    if request.path.startswith(GROUP_PREFIX):
        target = GROUPS
    elif request.path.startswith(QUEUE_PREFIX):
        target = QueueTarget(request.path.removeprefix(QUEUE_PREFIX).partition("/")[0])
    else:
        return await handler(request)
    # Every group and queue route needs a caller: one without a valid token is refused here, before
    # this node creates the offsets topic, waits for the group coordinator or calls a peer for it.
    request[PRINCIPAL], request[LIMITS] = await node.auth.authenticate(request.headers.get("Authorization"))
    if target is GROUPS:
        await ensure_offsets_topic(node.coordinator, node.topics)
    where = await locate_groups(node.router) if target is GROUPS else node.router.locate(target)
    if isinstance(where, Here):
        return await handler(request)
    return await _pass_on(request, where.node.http_url)


async def _pass_on(request: web.Request, base_url: str) -> web.StreamResponse:
    node = request.app[NODE]
    try:
        async with asyncio.timeout(node.config.body_timeout_ms / 1000):
            body = await request.read()
    except TimeoutError as exc:
        raise RequestTimeoutError("the request body did not arrive in time") from exc
    headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS | {"x-forwarded-for"}}
    headers[FORWARDED] = str(node.config.node_id)
    address = client_address(request)
    if address:
        headers[FORWARDED_FOR] = address
    session = request.app[FORWARDER]
    try:
        upstream = await session.request(request.method, base_url.rstrip("/") + request.path_qs, headers=headers,
                                         data=body or None, allow_redirects=False)
    except (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError) as exc:
        raise NotAvailableError(f"the node at {base_url} failed TLS verification: {exc}") from exc
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:  # nothing was sent
        raise NoLeaderError(f"the node at {base_url} that serves this call cannot be reached; retry") from exc
    except aiohttp.ClientError as exc:
        raise ForwardOutcomeUnknownError(f"the node at {base_url} that serves this call did not answer: "
                                         f"{exc}") from exc
    async with upstream:
        response = web.StreamResponse(status=upstream.status, headers={
            k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS})
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_chunked(CHUNK_BYTES):
                await response.write(chunk)
        except (aiohttp.ClientError, ConnectionResetError):
            return response  # either side went away mid-stream: the answer ends there
        await response.write_eof()
        return response


async def forwarder(app: web.Application) -> AsyncIterator[None]:
    """The HTTP client this node passes group and queue calls on with (a cluster node only)."""
    config = app[NODE].config
    context = node_client_context(config) if config.tls_cert_file else None
    timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_connect=CONNECT_TIMEOUT_S)
    connector = aiohttp.TCPConnector(ssl=context if context is not None else True, limit=config.connections_max)
    app[FORWARDER] = aiohttp.ClientSession(timeout=timeout, connector=connector, auto_decompress=False)
    yield
    await app[FORWARDER].close()
