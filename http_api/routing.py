"""The route table: every handler is registered with its method, path, OpenAPI description and
the access it needs, so the router, the OpenAPI document and the auth middleware come from one
list and cannot disagree. A route that does not say who may call it cannot be registered.

Access levels: ``public`` (no token), ``user`` (any authenticated user), ``admin``, ``self``
(the user named by ``{name}`` or an admin), the topic actions ``describe``, ``read``,
``write``, ``manage`` on the topic or queue named by ``{name}`` (see ``logbroker.auth.permissions``),
the group actions ``group_describe``, ``group_read``, ``group_manage`` on the consumer group named by
``{group}`` (see ``logbroker.auth.groups``), and ``metrics`` (the scrape credential, or public when
the node says so). ``quota`` names the byte-rate quota a route is charged to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from aiohttp import web

from logbroker.auth.groups import GroupAction
from logbroker.auth.permissions import Action
from logbroker.auth.quotas import QuotaKind

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Access = Literal["public", "metrics", "user", "admin", "self", "describe", "read", "write", "manage",
                 "group_describe", "group_read", "group_manage"]
TOPIC_ACCESS: Final[dict[str, Action]] = {"describe": "describe", "read": "read", "write": "write",
                                          "manage": "manage"}
GROUP_ACCESS: Final[dict[str, GroupAction]] = {"group_describe": "describe", "group_read": "read",
                                               "group_manage": "manage"}


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    access: Access
    quota: QuotaKind | None = None
    parameters: tuple[dict[str, Any], ...] = ()
    request_body: dict[str, Any] | None = None
    responses: dict[str, str] = dataclasses.field(default_factory=dict)
    documented: bool = True  # False: a page for people (the console), kept out of the OpenAPI document


ROUTES: list[Route] = []
ROUTE_BY_HANDLER: dict[Handler, Route] = {}


def route(method: str, path: str, summary: str, *, access: Access, quota: QuotaKind | None = None,
          query: tuple[tuple[str, str, str], ...] = (), headers: tuple[tuple[str, str, str], ...] = (),
          body: dict[str, Any] | None = None,
          responses: dict[str, str] | None = None, documented: bool = True) -> Callable[[Handler], Handler]:
    """Register a handler. ``query`` and ``headers`` are ``(name, type, description)`` triples of
    the query parameters and request headers it reads; path parameters are taken from ``{name}``
    segments of ``path``."""
    if (access in TOPIC_ACCESS or access == "self") and "{name}" not in path:
        raise AssertionError(f"{method} {path}: access {access!r} needs a {{name}} path segment")
    if access in GROUP_ACCESS and "{group}" not in path:
        raise AssertionError(f"{method} {path}: access {access!r} needs a {{group}} path segment")

    def register(handler: Handler) -> Handler:
        params: list[dict[str, Any]] = [
            {"name": seg[1:-1], "in": "path", "required": True,
             "schema": {"type": "integer" if seg == "{partition}" else "string"}}
            for seg in path.split("/") if seg.startswith("{")
        ]
        params += [{"name": n, "in": where, "required": False, "schema": {"type": t}, "description": d}
                   for where, given in (("query", query), ("header", headers)) for n, t, d in given]
        entry = Route(method, path, handler, summary, access, quota, tuple(params), body,
                      responses or {"200": "OK"}, documented)
        ROUTES.append(entry)
        ROUTE_BY_HANDLER[handler] = entry
        return handler

    return register
