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
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from http_api.errors import Handler
from http_api.keys import NODE
from logbroker.errors import RequestTimeoutError


@web.middleware
async def body_deadline_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.body_exists:
        timeout_ms = request.app[NODE].config.body_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await request.read()
        except TimeoutError:
            raise RequestTimeoutError(f"the request body did not arrive within {timeout_ms} ms (body_timeout_ms)",
                                      body_timeout_ms=timeout_ms) from None
    return await handler(request)
