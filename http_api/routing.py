"""The route table: every handler is registered with its method, path and OpenAPI description,
so the router and the OpenAPI document come from one list and cannot disagree."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    parameters: tuple[dict[str, Any], ...] = ()
    request_body: dict[str, Any] | None = None
    responses: dict[str, str] = dataclasses.field(default_factory=dict)


ROUTES: list[Route] = []


def route(method: str, path: str, summary: str, *, query: tuple[tuple[str, str, str], ...] = (),
          body: dict[str, Any] | None = None, responses: dict[str, str] | None = None) -> Callable[[Handler], Handler]:
    """Register a handler. ``query`` is ``(name, type, description)`` triples; path parameters are
    taken from ``{name}`` segments of ``path``."""

    def register(handler: Handler) -> Handler:
        params: list[dict[str, Any]] = [
            {"name": seg[1:-1], "in": "path", "required": True,
             "schema": {"type": "integer" if seg == "{partition}" else "string"}}
            for seg in path.split("/") if seg.startswith("{")
        ]
        params += [{"name": n, "in": "query", "required": False, "schema": {"type": t}, "description": d}
                   for n, t, d in query]
        ROUTES.append(Route(method, path, handler, summary, tuple(params), body, responses or {"200": "OK"}))
        return handler

    return register
