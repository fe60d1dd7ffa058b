"""Errors aiohttp answers before the application sees a request, as problem+json.

A request aiohttp's parser refuses (a header line longer than its limit, a malformed request line)
and an exception that escapes every middleware are answered by the connection's
``RequestHandler.handle_error``, outside the app, in plain text. ``ProblemAppRunner`` serves the
app with a handler whose ``handle_error`` answers with the same problem+json as every other error
(status as aiohttp chose it; the detail names the limit, never echoes the refused bytes). aiohttp
still logs the error and closes the connection, as before.
"""

from __future__ import annotations

from typing import Final, final

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, BadStatusLine, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from http_api.errors import problem

CODE_BY_STATUS: Final = {400: "invalid_request", 500: "internal"}


def detail_of(status: int, exc: BaseException | None, line_bytes_max: int) -> str:
    """What to tell the client: the kind of fault, not the bytes that caused it (they may hold a
    credential, and they are what was too long)."""
    if isinstance(exc, LineTooLong):
        return f"a request line or header is longer than the server accepts ({line_bytes_max} bytes)"
    if isinstance(exc, (BadStatusLine, BadHttpMethod)):
        return "the request line is not valid HTTP/1.1"
    if isinstance(exc, BadHttpMessage):
        return f"the request is not valid HTTP/1.1 ({type(exc).__name__})"
    if status == 500:
        return "internal error"
    return f"the request could not be handled (HTTP {status})"


@final
class _ProblemRequestHandler(RequestHandler):
    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs; refuses when a response began
        detail = detail_of(status, exc, max(self.max_line_size, self.max_field_size))
        response = problem(status, detail, code=CODE_BY_STATUS.get(status, "http_error"))
        response.force_close()
        return response


@final
class _ProblemServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _ProblemRequestHandler(self, loop=self._loop, **self._kwargs)


@final
class ProblemAppRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer protocol-level errors as problem+json."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return _ProblemServer(server.request_handler, request_factory=server.request_factory,
                              handler_cancellation=server.handler_cancellation, loop=server._loop,
                              **server._kwargs)
