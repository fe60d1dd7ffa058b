"""Typed RPC errors. A handler's error travels as its stable ``code`` in the answer frame; the
caller gets an ``RpcCallError`` with the same code, so the node can rebuild its own error class
by code, as the HTTP layer maps codes to statuses. ``Status`` says how a call ended, in the
vocabulary callers already reason with (a deadline, an unreachable node, an outcome unknown)."""

from __future__ import annotations

import enum
from typing import Any, Final

ERROR_EXTRA_BYTES_MAX: Final = 4096


class Status(enum.Enum):
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"  # the request was written and the connection was lost before its answer
    DEADLINE_EXCEEDED = "deadline_exceeded"
    RESOURCE_EXHAUSTED = "resource_exhausted"
    FAILED_PRECONDITION = "failed_precondition"
    UNIMPLEMENTED = "unimplemented"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"  # never sent: no connection, or refused before the request
    UNAUTHENTICATED = "unauthenticated"


RETRIABLE_STATUSES: Final = frozenset({Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.RESOURCE_EXHAUSTED})


class RpcError(Exception):
    code = "rpc_error"
    retriable = False


class RpcConfigError(RpcError):
    """TLS files or the cluster token are missing or unreadable."""

    code = "rpc_config"


class RpcCallError(RpcError):
    """A call failed: refused (authentication), unreachable, timed out, or the handler raised."""

    def __init__(self, status: Status, code: str, message: str,
                 extra: dict[str, Any] | None = None, *, answered: bool = False) -> None:
        super().__init__(f"{status.name} {code}: {message}")
        self.status = status
        self.code = code
        self.detail = message
        self.extra = extra or {}
        self.retriable = status in RETRIABLE_STATUSES
        # True when the remote handler itself raised (the call reached it and was refused);
        # False when the call failed on the way (unreachable, deadline, cancelled, auth).
        self.answered = answered
