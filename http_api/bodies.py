"""The bound on receiving a request body: all of it within ``body_timeout_ms`` of starting to read.

aiohttp reads a body only when a handler asks for it, with no time limit, so a client could send a
head and then trickle (or stall) its body for ever, holding a handler and a connection. This
middleware sits after authentication (only callers that passed it make the node buffer a body, at
most ``request_body_bytes_max``) and reads every body before the handler, within the bound; the
handlers' own ``request.read()`` then return the bytes already read (so a handler asks
``request.body_exists``, never ``can_read_body``, which is false once the body is read). A body
not complete in time is answered 408 ``request_timeout`` with ``Connection: close`` (what is left
of the body cannot be told from a next request); aiohttp then discards what still arrives for at
most its ``lingering_time`` (10 s) and closes the connection. The bound is on the whole body, not
between reads: with the defaults (16 MiB, 60 s) a client must send at least ~280 KB/s.

A produce and the queue calls (routes whose ``front_door`` is in ``READ_BY_FRONT_DOOR``) read
their body the same way, with ``read_body``, when the broker's front door asks for it: after the
caller was authorized and within quota, and inside the call that charges what was read, so a
refused body (too large, too slow, invalid) is charged as a stored one is (decisions 0373, 0402).
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from http_api.errors import Handler
from http_api.keys import NODE
from http_api.routing import ROUTE_BY_HANDLER
from logbroker.api_types import Operation
from logbroker.errors import RequestTimeoutError

READ_BY_FRONT_DOOR: Final[frozenset[Operation]] = frozenset(
    {"publish", "queue_send", "queue_receive", "queue_settle"})


@web.middleware
async def body_deadline_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    entry = ROUTE_BY_HANDLER.get(request.match_info.handler)
    if request.body_exists and (entry is None or entry.front_door not in READ_BY_FRONT_DOOR):
        await read_body(request)
    return await handler(request)


async def read_body(request: web.Request) -> bytes:
    """The whole body of ``request``, all of it within ``body_timeout_ms`` (else 408)."""
    timeout_ms = request.app[NODE].config.body_timeout_ms
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            return await request.read()
    except TimeoutError:
        raise RequestTimeoutError(f"the request body did not arrive within {timeout_ms} ms (body_timeout_ms)",
                                  body_timeout_ms=timeout_ms) from None
