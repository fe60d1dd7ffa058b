"""The broker's errors as gRPC statuses, from the one table that gives each error ``code`` its
HTTP and its gRPC status (``logbroker.error_codes``). Retriable errors carry ``retry-after-ms`` in
the trailing metadata, as HTTP's ``Retry-After`` does, and every refusal also carries gRPC's rich
error details (``google.rpc.Status`` with ``ErrorInfo`` and ``RetryInfo``, from
googleapis-common-protos), which generated clients in any language decode."""

from __future__ import annotations

from typing import Any, Final, NoReturn

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2

from logbroker.error_codes import answer_of

RETRY_AFTER_DEFAULT_S: Final = 1.0  # a retriable refusal whose error and row name no wait
CODE_KEY: Final = "x-logbroker-error-code"
RETRY_KEY: Final = "retry-after-ms"
DETAILS_KEY: Final = "grpc-status-details-bin"
ERROR_DOMAIN: Final = "logbroker"


def status_details(code: str, detail: str, *, retriable: bool = False, retry_after_s: float | None = None
                   ) -> tuple[grpc.StatusCode, str, tuple[tuple[str, str | bytes], ...]]:
    """The status, message and trailing metadata of a refusal (pure): the broker's ``code`` as
    ``x-logbroker-error-code`` and in a ``google.rpc.ErrorInfo``; for a retriable one, how long to
    wait as ``retry-after-ms`` and as a ``google.rpc.RetryInfo`` (gRPC's rich error model, which
    ``grpc_status.rpc_status.from_call`` reads)."""
    answer = answer_of(code)
    status = grpc.StatusCode[answer.grpc]
    message = detail[:1000]
    trailing: list[tuple[str, str | bytes]] = [(CODE_KEY, code)]
    rich = status_pb2.Status(code=status.value[0], message=message)
    rich.details.add().Pack(error_details_pb2.ErrorInfo(reason=code, domain=ERROR_DOMAIN))
    if retriable or retry_after_s is not None:
        wait = retry_after_s if retry_after_s is not None else answer.retry_after_s
        if wait is None:
            wait = RETRY_AFTER_DEFAULT_S
        wait_ms = max(1, round(wait * 1000))
        trailing.append((RETRY_KEY, str(wait_ms)))
        delay = duration_pb2.Duration(seconds=wait_ms // 1000, nanos=(wait_ms % 1000) * 1_000_000)
        rich.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    trailing.append((DETAILS_KEY, rich.SerializeToString()))
    return status, message, tuple(trailing)


async def abort(context: Any, code: str, detail: str, *, retriable: bool = False,
                retry_after_s: float | None = None) -> NoReturn:
    """End the call with the status of ``code`` and the trailing metadata ``status_details`` gives."""
    status, message, trailing = status_details(code, detail, retriable=retriable, retry_after_s=retry_after_s)
    await context.abort(status, message, trailing_metadata=trailing)
    raise AssertionError("unreachable")


async def abort_for(context: Any, exc: Exception) -> NoReturn:
    """``abort`` for one of the broker's typed errors (anything else is INTERNAL)."""
    code = getattr(exc, "code", None)
    if not isinstance(code, str):
        await abort(context, "internal", "internal error")
    extra = getattr(exc, "extra", None) or {}
    retry = extra.get("retry_after_s") if isinstance(extra, dict) else None
    await abort(context, code, str(exc), retriable=bool(getattr(exc, "retriable", False)),
                retry_after_s=retry if isinstance(retry, (int, float)) else None)
