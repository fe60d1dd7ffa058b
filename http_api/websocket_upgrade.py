"""The upgrade of a WebSocket stream (produce and subscribe streams): refused with a problem when
the request is not an upgrade, so a client never holds a half-open socket; prepared only once the
stream has its slots (``user_limits.stream_slot`` calls the opener)."""

from __future__ import annotations

from aiohttp import web

from http_api.user_limits import Opener
from logbroker.errors import InvalidRequestError


def upgrade_opener(request: web.Request, socket: web.WebSocketResponse, kind: str) -> Opener:
    """The opener of ``socket`` for ``stream_slot``; ``InvalidRequestError`` (400) when ``request``
    cannot be upgraded to it."""
    if not socket.can_prepare(request).ok:
        raise InvalidRequestError(f"a {kind} stream is a WebSocket: send the upgrade headers "
                                  "(Connection: Upgrade, Upgrade: websocket)")

    async def accept(req: web.Request) -> web.StreamResponse:
        await socket.prepare(req)
        return socket

    return accept
