"""Errors as ``application/problem+json``: the one table from error code to HTTP status.

Every typed error of the broker, storage and coordination layers carries a ``code``; handlers
never choose a status themselves. Anything else that escapes a handler is a bug: it is logged with
its traceback and answered 500 without details.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from http_api.json_codec import encode
from logbroker.errors import ANY_ERROR, OffsetOutOfRangeError

log = logging.getLogger(__name__)
PROBLEM_TYPE: Final = "application/problem+json"

STATUS_BY_CODE: Final[dict[str, int]] = {
    "invalid_request": 400,
    "invalid_argument": 400,
    "invalid_batch": 400,
    "invalid_timestamp": 400,
    "corrupt_batch": 400,
    "invalid_topic": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "storage_quota_exceeded": 403,
    "not_found": 404,
    "unknown_topic": 404,
    "unknown_partition": 404,
    "unknown_group": 404,
    "unknown_member": 404,
    "topic_exists": 409,
    "user_exists": 409,
    "user_owns_topics": 409,
    "invalid_user": 400,
    "unknown_user": 404,
    "stale_leader_epoch": 409,
    "non_sequential_append": 409,
    "stale_generation": 409,
    "not_assigned": 409,
    "group_not_empty": 409,
    "inconsistent_strategy": 409,
    "not_a_queue": 409,
    "idempotency_conflict": 409,
    "dead_letter_refused": 409,
    "lease_expired": 409,
    "not_a_cluster": 409,
    "request_timeout": 408,
    "batch_too_large": 413,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "offset_out_of_range": 416,
    "too_many_requests": 429,
    "not_available": 503,
    "too_many_connections": 503,
    "log_closed": 503,
    "storage_busy": 503,
    "log_offline": 503,
    "undecryptable_batch": 503,
    "too_many_open_files": 503,
    "storage_full": 507,
    "coordinator_unavailable": 503,
    "not_leader": 503,
    "no_leader": 503,
    "not_enough_replicas": 503,
    "partial_write": 502,
    "forward_outcome_unknown": 504,
    "replication_timeout": 504,
}
# A cluster's retriable 503s (DESIGN §4): the client refreshes its metadata and retries after this.
# Leadership moves in well under a second once decided: the body's exact wait; the header rounds up.
CLUSTER_RETRY_AFTER_S: Final = 0.2
CLUSTER_RETRY_CODES: Final = frozenset({"not_leader", "no_leader", "not_enough_replicas", "coordinator_unavailable"})
STORAGE_FULL_RETRY_AFTER_S: Final = 5
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
    status = STATUS_BY_CODE.get(code, 500)
    extra: dict[str, Any] = dict(getattr(exc, "extra", {}) or {})
    if code == "storage_full":
        extra.setdefault("retry_after_s", STORAGE_FULL_RETRY_AFTER_S)
    if code in CLUSTER_RETRY_CODES:
        extra.setdefault("retry_after_s", CLUSTER_RETRY_AFTER_S)
    if isinstance(exc, OffsetOutOfRangeError):
        extra.update(earliest=exc.earliest, latest=exc.latest)
    return problem(status, str(exc), code=code, retriable=bool(getattr(exc, "retriable", False)), **extra)


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
