"""A Kafka connection's state, and how a LogBroker error reads as a Kafka error code (one table:
``logbroker.error_codes``; the record codec's own errors have Kafka's codes for them)."""

from __future__ import annotations

import dataclasses

from kafka_api import record_batch
from logbroker.api_types import CallContext
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.error_codes import answer_of
from logbroker.errors import ForbiddenError
from logbroker.kafka_error_numbers import (
    CORRUPT_MESSAGE,
    GROUP_AUTHORIZATION_FAILED,
    UNKNOWN_SERVER_ERROR,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
)


@dataclasses.dataclass(slots=True)
class Session:
    """One connection's state: who it authenticated as (None: not yet) and the SASL mechanism its
    handshake chose."""

    address: str
    principal: Principal | None = None
    limits: QuotaLimits | None = None
    mechanism: str | None = None
    failed: bool = False  # authentication failed: the connection closes after the answer
    credential_version: int | None = None  # the user's when it authenticated
    user_id: str | None = None  # and its id (a user made again under the name has another)
    unframed_sasl: bool = False  # a v0 handshake: the next frame is the bare SASL message
    expires_at: float | None = None  # a token's session ends then (epoch s) unless re-authenticated (KIP-368)
    client_id: str = ""  # the last request header's (wire.CLIENT_ID_CHARS_MAX at most): DescribeGroups shows it

    def context(self) -> CallContext:
        assert self.principal is not None and self.limits is not None
        return CallContext(self.principal, self.limits)


def error_code(exc: BaseException) -> int:
    """A LogBroker error as Kafka's error code (one table: ``logbroker.error_codes``)."""
    if isinstance(exc, record_batch.UnsupportedCompression):
        return UNSUPPORTED_COMPRESSION_TYPE
    if isinstance(exc, record_batch.UnsupportedBatch):
        return UNSUPPORTED_FOR_MESSAGE_FORMAT
    if isinstance(exc, record_batch.RecordBatchError):
        return CORRUPT_MESSAGE
    code = getattr(exc, "code", None)
    return answer_of(code).kafka if isinstance(code, str) else UNKNOWN_SERVER_ERROR


def group_error_code(exc: BaseException) -> int:
    """``error_code`` where the thing refused is a group (GROUP_AUTHORIZATION_FAILED, not the topic's)."""
    return GROUP_AUTHORIZATION_FAILED if isinstance(exc, ForbiddenError) else error_code(exc)
