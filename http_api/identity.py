"""Who is calling, for the group, queue and stream handlers: the caller's name; and from where,
for budgets kept per address (the client behind a trusted proxy, decision 0235)."""

from __future__ import annotations

from aiohttp import web

from http_api.auth import principal_of
from http_api.keys import NODE
from logbroker.proxies import trusted_proxies

FORWARDED_FOR = "X-Forwarded-For"


def client_address(request: web.Request) -> str:
    """The caller's address: the peer's, or when the peer is one of the node's
    ``trusted_proxies``, the client it names in ``X-Forwarded-For`` (``logbroker.proxies``)."""
    proxies = trusted_proxies(request.app[NODE].config.trusted_proxies)
    return proxies.client_address(request.remote or "", request.headers.getall(FORWARDED_FOR, ()))


def caller(request: web.Request) -> str | None:
    """The authenticated principal's name (``anonymous`` when authentication is off)."""
    return principal_of(request).name
