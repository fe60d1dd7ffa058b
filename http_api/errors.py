"""Errors as ``application/problem+json``, with the status ``logbroker.error_codes`` gives each code.

Every typed error of the broker, storage and coordination layers carries a ``code``; handlers
never choose a status themselves, and the table is the gRPC API's too (one row per code). Anything
else that escapes a handler is a bug: it is logged with its traceback and answered 500 without
details.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from http_api.json_codec import encode
from logbroker.error_codes import answer_of
from logbroker.errors import ANY_ERROR, OffsetOutOfRangeError

log = logging.getLogger(__name__)
PROBLEM_TYPE: Final = "application/problem+json"

TITLES: Final = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
                 408: "Request Timeout", 409: "Conflict", 413: "Payload Too Large", 415: "Unsupported Media Type",
                 416: "Range Not Satisfiable", 429: "Too Many Requests", 500: "Internal Server Error",
                 502: "Bad Gateway", 504: "Gateway Timeout",
                 503: "Service Unavailable", 507: "Insufficient Storage"}


def problem(status: int, detail: str, *, code: str, retriable: bool = False, **extra: Any) -> web.Response:
    body = {"type": f"https://logbroker.dev/errors/{code}", "title": TITLES.get(status, "Error"),
            "status": status, "detail": detail, "code": code, "retriable": retriable, **extra}
    response = web.Response(status=status, body=encode(body), content_type=PROBLEM_TYPE)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="logbroker"'
    if status == 408:  # the rest of a late body cannot be told from a next request: close after answering
        response.force_close()
    retry_after = extra.get("retry_after_s")
    if isinstance(retry_after, (int, float)):
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return response


def problem_for(exc: Exception) -> web.Response:
    code = getattr(exc, "code", "internal")
    answer = answer_of(code)
    extra: dict[str, Any] = dict(getattr(exc, "extra", {}) or {})
    if answer.retry_after_s is not None:
        extra.setdefault("retry_after_s", answer.retry_after_s)
    if isinstance(exc, OffsetOutOfRangeError):
        extra.update(earliest=exc.earliest, latest=exc.latest)
    return problem(answer.http, str(exc), code=code, retriable=bool(getattr(exc, "retriable", False)), **extra)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ANY_ERROR as exc:
        return problem_for(exc)
    except web.HTTPRequestEntityTooLarge:
        limit = request.app._client_max_size
        return problem(413, f"request body exceeds {limit} bytes", code="payload_too_large", limit_bytes=limit)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return problem(exc.status, exc.reason, code=exc.reason.lower().replace(" ", "_"))
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        return problem(500, "internal error", code="internal")
