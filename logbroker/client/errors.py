"""The client's error: an error answer of the broker (problem+json) or a transport failure.

A transport failure is one of two kinds, and retries depend on which: ``UnreachableError`` (no
connection was made, so nothing was sent: any call may be retried) or a plain ``LogBrokerError``
with status 0 (the request may have reached the node: only a read is safe to send again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import aiohttp

RETRIABLE_STATUSES: Final = frozenset({429, 502, 503, 504})


class LogBrokerError(Exception):
    """An error answer from the broker (problem+json), or a transport failure (status 0)."""

    def __init__(self, status: int, code: str, detail: str, *, retriable: bool = False,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.retriable = status, code, detail, retriable
        self.extra = extra or {}

    @property
    def retry_after_s(self) -> float | None:
        """The wait the node asked for (``Retry-After``), if it asked."""
        value = self.extra.get("retry_after_s")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class UnreachableError(LogBrokerError):
    """No connection to the node could be made (refused, no route, connect timeout): the request
    was never sent. Its code stays ``transport``, as for any transport failure."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(0, "transport", detail, retriable=True, extra={"url": url})


def transport_error(url: str, what: str, exc: BaseException) -> LogBrokerError:
    """The error of a failed exchange with ``url``: ``UnreachableError`` when no connection was
    made (refused, unresolvable, connect timeout; a TLS failure is not one), else status 0."""
    detail = f"{what} on {url}: {exc!r}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError) or (
            isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(exc, aiohttp.ClientSSLError)):
        return UnreachableError(url, detail)
    return LogBrokerError(0, "transport", detail, retriable=True, extra={"url": url})


def problem_error(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> LogBrokerError:
    """The error of an error answer; a ``Retry-After`` header (seconds) lands in ``extra``."""
    retry_after = _retry_after(headers)
    try:
        problem = json.loads(body)
        if not isinstance(problem, dict):
            raise ValueError("not a problem object")
        extra = dict(problem)
        precise = problem.get("retry_after_s")  # the body's wait is exact; the header's whole seconds
        if not (isinstance(precise, (int, float)) and not isinstance(precise, bool) and 0 <= precise < float("inf")):
            extra.pop("retry_after_s", None)
            if retry_after is not None:
                extra["retry_after_s"] = retry_after
        return LogBrokerError(status, str(problem.get("code", "error")), str(problem.get("detail", "")),
                              retriable=bool(problem.get("retriable")) or status in RETRIABLE_STATUSES,
                              extra=extra)
    except ValueError:
        return LogBrokerError(status, "error", body[:200].decode(errors="replace"),
                              retriable=status in RETRIABLE_STATUSES,
                              extra={} if retry_after is None else {"retry_after_s": retry_after})


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    """``Retry-After`` in seconds (the HTTP-date form is not used by the broker and is ignored)."""
    raw = (headers or {}).get("Retry-After")
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value < float("inf") else None


def problem_of_text(text: str) -> LogBrokerError:
    """The error a stream carried as a problem body in text (an SSE ``error`` event, a WebSocket
    text message), its status read from the body."""
    try:
        status = int(json.loads(text).get("status", 0))
    except (ValueError, AttributeError, TypeError):
        status = 0
    return problem_error(status, text.encode())
