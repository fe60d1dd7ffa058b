"""The route table: every handler is registered with its method, path, OpenAPI description and
the access it needs, so the router, the OpenAPI document and the auth middleware come from one
list and cannot disagree. A route that does not say who may call it cannot be registered.

Access levels: ``public`` (no token), ``user`` (any authenticated user), ``admin``, ``self``
(the user named by ``{name}`` or an admin), the topic actions ``describe``, ``read``,
``write``, ``manage`` on the topic or queue named by ``{name}`` (see ``logbroker.auth.permissions``),
the group actions ``group_describe``, ``group_read``, ``group_manage`` on the consumer group named by
``{group}`` (see ``logbroker.auth.groups``), and ``metrics`` (the scrape credential, or public when
the node says so). ``quota`` names the byte-rate quota a route is charged to.

``front_door`` names the ``logbroker.api`` operation a route calls (decision 0373): the broker's
front door then authorizes, checks the quota and charges it, and the auth middleware only
authenticates the caller. Its declared access and quota must be the ones the operation applies
(``logbroker.api_types.declared_access``), so the table and the OpenAPI document still say what it needs.

Every route also has one tag (the section of the API explorer it is listed under), taken from its
path by ``TAG_PATHS`` unless it names one; a route whose tag is not in ``TAGS`` cannot be registered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from aiohttp import web

from coordinator.models import NAME_PATTERN
from coordinator.users import USER_NAME_PATTERN
from logbroker.api_types import Operation, declared_access
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
    tag: str = dataclasses.field(kw_only=True)  # its section of the API (one of ``TAGS``)
    front_door: Operation | None = dataclasses.field(default=None, kw_only=True)


# The sections of the API, in the order the explorer lists them: logging in first, since every
# other call needs its token.
TAGS: Final[tuple[tuple[str, str], ...]] = (
    ("auth", "Logging in: a username and password give a bearer token (send it as "
             "`Authorization: Bearer <token>`; in this explorer, paste it under Authorize)"),
    ("topics", "Topics and queues: create, list, describe, add partitions, delete; owners and grants"),
    ("records", "Produce and fetch records, find offsets, idempotent producers, live streams"),
    ("groups", "Consumer groups: join, heartbeat, leave, commit and reset offsets, lag, grants"),
    ("queues", "Queues: send, receive (leased), acknowledge and give back messages"),
    ("users", "Users, passwords, quotas and storage, what each owns and is granted"),
    ("usage", "Usage records: bytes and records in and out, requests, stream time and storage, per user, "
              "topic and hour or day"),
    ("cluster", "Nodes, liveness, partition placement and leaders; rebalance and decommission"),
    ("service", "This node: health, readiness, metrics, the entry points and this document"),
)
TAG_NAMES: Final = frozenset(name for name, _ in TAGS)
# A route's tag by the start of its path (whole segments), first match wins: a partition's
# records and streams before the topic they belong to.
TAG_PATHS: Final[tuple[tuple[str, str], ...]] = (
    ("/v1/auth", "auth"), ("/v1/producers", "records"), ("/v1/topics/{name}/records", "records"),
    ("/v1/topics/{name}/partitions/{partition}", "records"), ("/v1/topics", "topics"),
    ("/v1/groups", "groups"), ("/v1/queues", "queues"), ("/v1/users", "users"), ("/v1/usage", "usage"),
    ("/v1/cluster", "cluster"),
    ("/v1/openapi.json", "service"), ("/healthz", "service"), ("/readyz", "service"), ("/metrics", "service"),
    ("/", "service"), ("/favicon.ico", "service"), ("/console", "service"), ("/docs", "service"),
)


def tag_of(path: str) -> str | None:
    """The tag ``TAG_PATHS`` gives ``path``, or None when no entry covers it."""
    for start, tag in TAG_PATHS:
        if path == start or (start != "/" and path.startswith(start + "/")):
            return tag
    return None


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
          responses: dict[str, str] | None = None, documented: bool = True,
          tag: str | None = None, front_door: Operation | None = None) -> Callable[[Handler], Handler]:
    """Register a handler. ``query`` and ``headers`` are ``(name, type, description)`` triples of
    the query parameters and request headers it reads (``required``: the query parameters it
    refuses to go without); path parameters are taken from ``{name}`` segments of ``path``.
    ``tag``: its section of the API (default: the one its path gives, see ``TAG_PATHS``);
    ``front_door``: the ``logbroker.api`` operation that authorizes and charges it."""
    if front_door is not None and (access, quota) != declared_access(front_door):
        raise AssertionError(f"{method} {path}: {front_door!r} needs access and quota "
                             f"{declared_access(front_door)}, not {(access, quota)}")
    if (access in TOPIC_ACCESS or access == "self") and "{name}" not in path:
        raise AssertionError(f"{method} {path}: access {access!r} needs a {{name}} path segment")
    if access in GROUP_ACCESS and "{group}" not in path:
        raise AssertionError(f"{method} {path}: access {access!r} needs a {{group}} path segment")
    section = tag if tag is not None else tag_of(path)
    if section is None or section not in TAG_NAMES:
        raise AssertionError(f"{method} {path}: tag {section!r} is not one of {sorted(TAG_NAMES)} (name one)")

    def register(handler: Handler) -> Handler:
        params: list[dict[str, Any]] = [
            {"name": seg[1:-1], "in": "path", "required": True, "schema": path_schema(path, seg[1:-1])}
            for seg in path.split("/") if seg.startswith("{")
        ]
        params += [{"name": n, "in": where, "required": n in required and where == "query", "schema": {"type": t},
                    "description": d} for where, given in (("query", query), ("header", headers)) for n, t, d in given]
        entry = Route(method, path, handler, summary, access, quota, tuple(params), body,
                      responses or {"200": "OK"}, documented, tag=section, front_door=front_door)
        ROUTES.append(entry)
        ROUTE_BY_HANDLER[handler] = entry
        return handler

    return register
