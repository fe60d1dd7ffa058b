"""The web console (``/console``), the API explorer (``/docs``), the favicon and the root (``/``),
served by every node.

Both are static pages that call the HTTP API with the token the user gets by logging in, so they
see exactly what the API lets that user see (decision 0217). The pages themselves are public; the
data is not. Assets are served from a list fixed at import (the files shipped in the package), never
from a path the request names, so no request can reach another file. Every answer carries a strict
Content-Security-Policy: the console runs only its own scripts and styles (no inline script, no
eval) and talks only to its own node; ``/docs`` also lets Swagger UI set inline styles.

``/`` sends a browser (a request whose ``Accept`` names ``text/html``, see ``http_api.negotiation``)
to the console and answers anyone else with the addresses of the entry points, in JSON; both answers
say ``Vary: Accept`` so a cache keeps them apart.
"""

from __future__ import annotations

import os
from typing import Final

import swagger_ui_bundle
from aiohttp import web

from http_api.json_codec import json_response
from http_api.negotiation import prefers_html
from http_api.routing import route
from logbroker.errors import NotFoundError

CONSOLE_DIR: Final = os.path.join(os.path.dirname(__file__), "console_static")
SWAGGER_DIR: Final = swagger_ui_bundle.swagger_ui_path
CONTENT_TYPES: Final = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                        ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml",
                        ".ico": "image/vnd.microsoft.icon"}
CONSOLE_CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                      "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
                      "frame-ancestors 'none'")
DOCS_CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                   "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; base-uri 'none'; "
                   "form-action 'none'; frame-ancestors 'none'")
SWAGGER_FILES: Final = ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css")
CONSOLE_PATH: Final = "/console"
ENTRY_POINTS: Final = {"service": "LogBroker", "api": "/v1", "openapi": "/v1/openapi.json", "docs": "/docs",
                       "console": CONSOLE_PATH, "health": "/healthz", "ready": "/readyz"}


def _assets(directory: str, names: tuple[str, ...] | None = None) -> dict[str, tuple[bytes, str]]:
    """The files of ``directory`` (or just ``names``) with their content types, read once."""
    out: dict[str, tuple[bytes, str]] = {}
    for name in names if names is not None else sorted(os.listdir(directory)):
        kind = CONTENT_TYPES.get(os.path.splitext(name)[1])
        path = os.path.join(directory, name)
        if kind is not None and os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = (f.read(), kind)
    return out


CONSOLE_ASSETS: Final = _assets(CONSOLE_DIR)
DOCS_ASSETS: Final = {**_assets(SWAGGER_DIR, SWAGGER_FILES),
                      **{name[len("docs-"):]: asset for name, asset in CONSOLE_ASSETS.items()
                         if name.startswith("docs-")}}


def _answer(assets: dict[str, tuple[bytes, str]], name: str, csp: str) -> web.Response:
    asset = assets.get(name)
    if asset is None:
        raise NotFoundError(f"no such file: {name[:100]!r}")
    body, kind = asset
    return web.Response(body=body, headers={
        "Content-Type": kind, "Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache" if kind.startswith("text/html") else "max-age=300"})


@route("GET", "/console", "The web console (a page for people)", access="public", documented=False)
async def console_page(request: web.Request) -> web.StreamResponse:
    return _answer(CONSOLE_ASSETS, "index.html", CONSOLE_CSP)


@route("GET", "/console/{asset}", "A file of the web console", access="public", documented=False)
async def console_asset(request: web.Request) -> web.StreamResponse:
    return _answer(CONSOLE_ASSETS, request.match_info["asset"], CONSOLE_CSP)


@route("GET", "/docs", "The API explorer over /v1/openapi.json (a page for people)", access="public",
       documented=False)
async def docs_page(request: web.Request) -> web.StreamResponse:
    return _answer(DOCS_ASSETS, "index.html", DOCS_CSP)


@route("GET", "/docs/{asset}", "A file of the API explorer", access="public", documented=False)
async def docs_asset(request: web.Request) -> web.StreamResponse:
    return _answer(DOCS_ASSETS, request.match_info["asset"], DOCS_CSP)


@route("GET", "/", "The entry points: a browser (Accept naming text/html) is sent to the console, any other "
       "client gets the paths of the API, this document, the explorer and the console", access="public",
       responses={"200": "The entry points", "302": "A browser: to /console"})
async def root(request: web.Request) -> web.StreamResponse:
    if prefers_html(request.headers.get("Accept")):
        return web.Response(status=302, headers={"Location": CONSOLE_PATH, "Vary": "Accept"})
    return json_response(ENTRY_POINTS, headers={"Vary": "Accept"})


@route("GET", "/favicon.ico", "The icon browsers ask every site for", access="public", documented=False)
async def favicon(request: web.Request) -> web.StreamResponse:
    return _answer(CONSOLE_ASSETS, "favicon.ico", CONSOLE_CSP)
