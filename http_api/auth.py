"""The auth middleware: who is calling, may they call this route, and are they within quota.

It reads the access a route declared in the route table (``http_api.routing``), so no handler
checks permissions by hand: the caller's ``Principal`` is put on the request (``principal_of``)
for handlers that need it (ownership of what they create, self-or-admin checks). A route served
by the broker's front door (``Route.front_door``: produce, fetch, list offsets, and the queue
calls) is only authenticated here: ``logbroker.api.BrokerApi`` creates its topic or queue on
first use, authorizes it, checks its quota and charges it, with the ``CallContext`` that
``call_context`` builds (decisions 0373, 0402). For other routes quotas are checked before the
handler and charged after it with the bytes really moved: the request body for produce (whatever
was read of it, also when the request is refused: validation has its cost), the response body for
fetch, through ``Meter`` which counts the same bytes as the caller's usage, with auth off too.

``/metrics`` (access ``metrics``) is open only on a node with ``metrics_public`` (or auth off):
otherwise a scraper sends ``Authorization: Bearer <metrics_token>`` (the node's static scrape
credential, compared in constant time) or an admin's token; its labels name every topic and group.
"""

from __future__ import annotations

import hmac
from typing import Final

from aiohttp import web

from http_api.keys import NODE
from http_api.params import path_topic
from http_api.routing import GROUP_ACCESS, ROUTE_BY_HANDLER, TOPIC_ACCESS, Handler, Route
from logbroker import api
from logbroker.api_types import CallContext
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.errors import ForbiddenError
from logbroker.groups.requests import group_name

PRINCIPAL: Final = "logbroker.principal"
LIMITS: Final = "logbroker.limits"


def principal_of(request: web.Request) -> Principal:
    """The authenticated caller of ``request`` (set by ``auth_middleware``)."""
    principal = request.get(PRINCIPAL)
    assert isinstance(principal, Principal), "auth_middleware did not run for this route"
    return principal


def limits_of(request: web.Request) -> QuotaLimits:
    """The quota and holding limits of the caller of ``request`` (set by ``auth_middleware``)."""
    limits = request.get(LIMITS)
    assert isinstance(limits, QuotaLimits), "auth_middleware did not run for this route"
    return limits


def call_context(request: web.Request) -> CallContext:
    """The front door's context of the authenticated caller of ``request`` (no deadline: an HTTP
    request has none but its own timeouts)."""
    return CallContext(principal_of(request), limits_of(request))


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    entry = ROUTE_BY_HANDLER.get(request.match_info.handler)
    if entry is None or entry.access == "public" or (entry.access == "metrics" and scrape_allowed(request)):
        return await handler(request)
    auth = request.app[NODE].auth
    if PRINCIPAL in request:  # authenticated already by the pass-on (a group or queue call)
        principal, limits = request[PRINCIPAL], request[LIMITS]
    else:
        principal, limits = await auth.authenticate(request.headers.get("Authorization"))
        request[PRINCIPAL], request[LIMITS] = principal, limits
    if entry.front_door is not None:  # authorized, checked and charged by the front door
        if auth.enabled:
            auth.admit_connection(principal, request.protocol, limits)
        return await handler(request)
    if auth.enabled:
        auth.admit_connection(principal, request.protocol, limits)
        await _authorize(request, entry, principal)
    if entry.quota is None:
        return await handler(request)
    quota = limits if auth.enabled else None  # usage is counted with auth off too; quotas are not
    if quota is not None:
        auth.check_quota(principal, entry.quota, quota)
    # A stream's opening is counted by the stream itself (``Meter.streaming``), once.
    calls = 0 if request.headers.get("Upgrade", "").lower() == "websocket" else 1
    if entry.quota == "produce":
        try:
            return await handler(request)
        finally:  # refused or not, the body was read: a large invalid one is not free
            auth.meter.charge(principal.name, "produce", quota, request.content.total_bytes,
                              topic=metered_topic(request), requests=calls)
    response = await handler(request)
    auth.meter.charge(principal.name, entry.quota, quota, response.content_length or 0, topic=metered_topic(request),
                      requests=calls)
    return response


def metered_topic(request: web.Request) -> str:
    """The topic a request's usage is counted under: the one its path names when that exists (after
    the handler: a topic created on first use counts), else ``OTHER``, so requests naming
    made-up topics cannot fill the usage ledger with names."""
    return api.metered_topic(request.app[NODE], request.match_info.get("name", ""))


async def recheck_access(request: web.Request) -> None:
    """Check again, for a call that runs on (a stream, a long-poll), that its token still stands and
    its caller may still do what the route needs: ``AuthenticationError`` or ``ForbiddenError``
    otherwise. The caller put on the request is refreshed (their role may have changed). Lookups
    are in memory: cheap enough for every delivery (decision 0175)."""
    if request.app[NODE].auth.enabled:
        ctx = await reauthenticated(request)
        await _authorize(request, ROUTE_BY_HANDLER[request.match_info.handler], ctx.principal)


async def reauthenticated(request: web.Request) -> CallContext:
    """The caller of a call that runs on, authenticated again from its token (``AuthenticationError``
    once it no longer stands) and put on the request: the front door's context for its next
    checks (decision 0175). Authentication off: the caller as it was."""
    auth = request.app[NODE].auth
    if auth.enabled:
        request[PRINCIPAL], request[LIMITS] = await auth.authenticate(request.headers.get("Authorization"))
    return call_context(request)


async def _authorize(request: web.Request, entry: Route, principal: Principal) -> None:
    if entry.access == "user":
        return
    if entry.access in ("admin", "metrics"):
        if not principal.is_admin:
            raise ForbiddenError(f"{request.method} {entry.path} is for admins only")
        return
    if entry.access == "self":
        if not principal.is_admin and request.match_info["name"] != principal.name:
            raise ForbiddenError(f"{principal.name!r} may only see or change their own user")
        return
    if entry.access in GROUP_ACCESS:
        await request.app[NODE].group_access.authorize(principal, group_name(request.match_info["group"]),
                                                       GROUP_ACCESS[entry.access])
        return
    action = TOPIC_ACCESS[entry.access]
    await request.app[NODE].auth.authorize_topic(principal, path_topic(request), action)


def scrape_allowed(request: web.Request) -> bool:
    """True when ``/metrics`` needs no user: the node opens it, or the scrape credential is sent."""
    node = request.app[NODE]
    if node.config.metrics_public == "true" or not node.auth.enabled:
        return True
    token = node.config.metrics_token
    sent = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())
