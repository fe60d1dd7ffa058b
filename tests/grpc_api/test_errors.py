"""The refusal table (pure): each broker error code gets the gRPC status its HTTP status maps to,
the code as ErrorInfo and metadata, and a retriable one a RetryInfo that says how long to wait."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from grpc_api.errors import CODE_KEY, DETAILS_KEY, RETRY_KEY, status_details


def _rich(trailing: tuple) -> status_pb2.Status:
    return status_pb2.Status.FromString(dict(trailing)[DETAILS_KEY])


@pytest.mark.parametrize(("code", "status"), [
    ("unauthenticated", grpc.StatusCode.UNAUTHENTICATED),
    ("forbidden", grpc.StatusCode.PERMISSION_DENIED),
    ("unknown_topic", grpc.StatusCode.NOT_FOUND),
    ("invalid_request", grpc.StatusCode.INVALID_ARGUMENT),
    ("too_many_requests", grpc.StatusCode.RESOURCE_EXHAUSTED),
    ("not_leader", grpc.StatusCode.UNAVAILABLE),
    ("log_offline", grpc.StatusCode.UNAVAILABLE),
    ("undecryptable_batch", grpc.StatusCode.FAILED_PRECONDITION),  # no retry brings a key back
    ("replication_timeout", grpc.StatusCode.DEADLINE_EXCEEDED),
    ("topic_exists", grpc.StatusCode.ALREADY_EXISTS),
    ("no_such_code", grpc.StatusCode.INTERNAL),
])
def test_each_code_gets_its_status_and_error_info(code, status):
    got, message, trailing = status_details(code, "x" * 2_000)
    assert got == status and len(message) == 1_000
    rich = _rich(trailing)
    assert rich.code == status.value[0] and rich.message == message
    info = error_details_pb2.ErrorInfo()
    assert rich.details[0].Unpack(info) and (info.reason, info.domain) == (code, "logbroker")
    assert dict(trailing)[CODE_KEY] == code and RETRY_KEY not in dict(trailing) and len(rich.details) == 1


@pytest.mark.parametrize(("code", "retry_after_s", "wait_ms"), [
    ("not_leader", None, 200),  # leadership moves fast: the cluster's short wait
    ("log_offline", None, 1_000),
    ("too_many_requests", 2.3456, 2_346),
    ("too_many_requests", 0.0001, 1),
])
def test_a_retriable_refusal_says_how_long_to_wait_twice(code, retry_after_s, wait_ms):
    _, _, trailing = status_details(code, "later", retriable=True, retry_after_s=retry_after_s)
    assert dict(trailing)[RETRY_KEY] == str(wait_ms)
    retry = error_details_pb2.RetryInfo()
    assert _rich(trailing).details[1].Unpack(retry)
    assert retry.retry_delay.seconds * 1000 + retry.retry_delay.nanos // 1_000_000 == wait_ms
