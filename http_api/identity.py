"""Who is calling, for the group, queue and stream handlers: the caller's name, and the check
that the caller may read the topics a group call names (the route table's access level covers
the topic in the path; group calls name their topics in the body or the assignment); and from
where, for budgets kept per address (the client behind a trusted proxy, decision 0235)."""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from http_api.auth import call_context, principal_of
from http_api.keys import FRONT_DOOR, NODE
from logbroker.groups.group import Caller
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


def group_caller(request: web.Request) -> Caller:
    """The caller as the group coordinator checks it against the member's principal."""
    principal = principal_of(request)
    return Caller(principal.name, principal.is_admin)


async def require_read(request: web.Request, topics: Iterable[str]) -> None:
    """``ForbiddenError`` unless the caller may read every topic of ``topics`` (the front door's check)."""
    await request.app[FRONT_DOOR].authorize_each(call_context(request), topics, "read")
