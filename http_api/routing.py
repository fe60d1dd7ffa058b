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

from coordinator.models import NAME_PATTERN
from coordinator.users import USER_NAME_PATTERN
from logbroker.auth.groups import GroupAction
from logbroker.auth.permissions import Action
from logbroker.auth.quotas import QuotaKind
from logbroker.groups.requests import MEMBER_ID_CHARS_MAX

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


# What a path segment accepts (anything else is a 400): topic, queue and group names, user names
# under /v1/users, member ids as join gives them, partitions from 0.
TOPIC_NAME_SCHEMA: Final = {"type": "string", "pattern": f"^{NAME_PATTERN.pattern}$"}
PATH_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "name": TOPIC_NAME_SCHEMA, "group": TOPIC_NAME_SCHEMA, "partition": {"type": "integer", "minimum": 0},
    "member": {"type": "string", "pattern": f"^[A-Za-z0-9-]{{1,{MEMBER_ID_CHARS_MAX}}}$"}}
USER_PATH_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "name": {"type": "string", "pattern": f"^{USER_NAME_PATTERN.pattern}$"}}


def path_schema(path: str, parameter: str) -> dict[str, Any]:
    if path.startswith("/v1/users/") and parameter in USER_PATH_SCHEMAS:
        return USER_PATH_SCHEMAS[parameter]
    return PATH_SCHEMAS.get(parameter, {"type": "string"})


ROUTES: list[Route] = []
ROUTE_BY_HANDLER: dict[Handler, Route] = {}


def route(method: str, path: str, summary: str, *, access: Access, quota: QuotaKind | None = None,
          query: tuple[tuple[str, str, str], ...] = (), required: tuple[str, ...] = (),
          headers: tuple[tuple[str, str, str], ...] = (), body: dict[str, Any] | None = None,
          responses: dict[str, str] | None = None, documented: bool = True) -> Callable[[Handler], Handler]:
    """Register a handler. ``query`` and ``headers`` are ``(name, type, description)`` triples of
    the query parameters and request headers it reads (``required``: the query parameters it
    refuses to go without); path parameters are taken from ``{name}`` segments of ``path``."""
    if (access in TOPIC_ACCESS or access == "self") and "{name}" not in path:
        raise AssertionError(f"{method} {path}: access {access!r} needs a {{name}} path segment")
    if access in GROUP_ACCESS and "{group}" not in path:
        raise AssertionError(f"{method} {path}: access {access!r} needs a {{group}} path segment")

    def register(handler: Handler) -> Handler:
        params: list[dict[str, Any]] = [
            {"name": seg[1:-1], "in": "path", "required": True, "schema": path_schema(path, seg[1:-1])}
            for seg in path.split("/") if seg.startswith("{")
        ]
        params += [{"name": n, "in": where, "required": n in required and where == "query", "schema": {"type": t},
                    "description": d} for where, given in (("query", query), ("header", headers)) for n, t, d in given]
        entry = Route(method, path, handler, summary, access, quota, tuple(params), body,
                      responses or {"200": "OK"}, documented)
        ROUTES.append(entry)
        ROUTE_BY_HANDLER[handler] = entry
        return handler

    return register
