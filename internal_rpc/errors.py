"""Typed RPC errors. A handler's error travels as its stable ``code`` (trailing metadata) plus a
gRPC status; the caller gets an ``RpcCallError`` with the same code, so the node can rebuild its
own error class by code, as the HTTP layer maps codes to statuses."""

from __future__ import annotations

from typing import Any, Final

import grpc

ERROR_CODE_KEY: Final = "x-logbroker-error-code"
ERROR_EXTRA_KEY: Final = "x-logbroker-error-extra"  # JSON object: the error's details (earliest/latest, ...)
ERROR_EXTRA_BYTES_MAX: Final = 4096
RETRIABLE_STATUSES: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                                       grpc.StatusCode.RESOURCE_EXHAUSTED})


class RpcError(Exception):
    code = "rpc_error"
    retriable = False


class RpcConfigError(RpcError):
    """TLS files or the cluster token are missing or unreadable."""

    code = "rpc_config"


class RpcCallError(RpcError):
    """A call failed: refused (authentication), unreachable, timed out, or the handler raised."""

    def __init__(self, status: grpc.StatusCode, code: str, message: str,
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
