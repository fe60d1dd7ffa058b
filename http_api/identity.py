"""Who is calling: the one place handlers of groups, queues and streams ask for the caller's
identity (None while the node runs without authentication)."""

from __future__ import annotations

from aiohttp import web


def caller(request: web.Request) -> str | None:
    """The authenticated principal of ``request``, or None when authentication is off."""
    del request
    return None
