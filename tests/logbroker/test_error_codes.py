"""The one error-code table (pure): every error class has its row, every row a class, and both APIs
answer each code as the table says: the HTTP status and problem+json they answered before the
table, the gRPC status they answered before it, and one wait for a retriable code in both."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest

import coordinator.etcd_seal
import grpc_api.server
import http_api.app
import segments.segment
from grpc_api.errors import RETRY_KEY, status_details
from http_api.errors import problem_for
from logbroker import errors
from logbroker.error_codes import ANSWERS, INTERNAL, answer_of
from logbroker.errors import ANY_ERROR, RemoteError

# Every module that defines an error class is loaded (the serve path loads the rest).
LOADED = (coordinator.etcd_seal, grpc_api.server, http_api.app, segments.segment)
PROJECT = ("segments", "coordinator", "internal_rpc", "logbroker", "http_api", "grpc_api")

# What the APIs answered before the table: (code, HTTP status, gRPC status). A change to this list
# is a change of the public APIs.
BEFORE = [
    ("batch_too_large", 413, "INVALID_ARGUMENT"), ("broker_error", 500, "INTERNAL"),
    ("coordinator_error", 500, "INTERNAL"), ("coordinator_unavailable", 503, "UNAVAILABLE"),
    ("corrupt_batch", 400, "INVALID_ARGUMENT"), ("corrupt_checkpoint", 500, "INTERNAL"),
    ("dead_letter_refused", 409, "FAILED_PRECONDITION"), ("forbidden", 403, "PERMISSION_DENIED"),
    ("forward_outcome_unknown", 504, "DEADLINE_EXCEEDED"), ("group_not_empty", 409, "FAILED_PRECONDITION"),
    ("idempotency_conflict", 409, "FAILED_PRECONDITION"), ("inconsistent_strategy", 409, "FAILED_PRECONDITION"),
    ("invalid_argument", 400, "INVALID_ARGUMENT"), ("invalid_batch", 400, "INVALID_ARGUMENT"),
    ("invalid_request", 400, "INVALID_ARGUMENT"), ("invalid_timestamp", 400, "INVALID_ARGUMENT"),
    ("invalid_topic", 400, "INVALID_ARGUMENT"), ("invalid_user", 400, "INVALID_ARGUMENT"),
    ("lease_expired", 409, "FAILED_PRECONDITION"), ("log_closed", 503, "UNAVAILABLE"),
    ("log_offline", 503, "UNAVAILABLE"), ("no_leader", 503, "UNAVAILABLE"),
    ("non_sequential_append", 409, "FAILED_PRECONDITION"), ("not_a_cluster", 409, "FAILED_PRECONDITION"),
    ("not_a_queue", 409, "FAILED_PRECONDITION"), ("not_assigned", 409, "FAILED_PRECONDITION"),
    ("not_available", 503, "UNAVAILABLE"), ("not_enough_replicas", 503, "UNAVAILABLE"),
    ("not_found", 404, "NOT_FOUND"), ("not_leader", 503, "UNAVAILABLE"),
    ("offset_out_of_range", 416, "OUT_OF_RANGE"),
    ("out_of_order_sequence", 409, "FAILED_PRECONDITION"),  # since Kafka's sequence checks (0392)
    ("partial_write", 502, "ABORTED"),
    ("payload_too_large", 413, "INVALID_ARGUMENT"), ("replication_timeout", 504, "DEADLINE_EXCEEDED"),
    ("request_timeout", 408, "DEADLINE_EXCEEDED"), ("segment_write_failed", 500, "INTERNAL"),
    ("stale_generation", 409, "FAILED_PRECONDITION"), ("stale_leader_epoch", 409, "FAILED_PRECONDITION"),
    ("storage_busy", 503, "UNAVAILABLE"), ("storage_error", 500, "INTERNAL"),
    ("storage_full", 507, "RESOURCE_EXHAUSTED"), ("storage_quota_exceeded", 403, "RESOURCE_EXHAUSTED"),
    ("too_many_connections", 503, "UNAVAILABLE"), ("too_many_open_files", 503, "UNAVAILABLE"),
    ("too_many_requests", 429, "RESOURCE_EXHAUSTED"), ("topic_exists", 409, "ALREADY_EXISTS"),
    ("unauthenticated", 401, "UNAUTHENTICATED"), ("undecryptable_batch", 503, "FAILED_PRECONDITION"),
    ("unknown_group", 404, "NOT_FOUND"), ("unknown_member", 404, "NOT_FOUND"),
    ("unknown_partition", 404, "NOT_FOUND"), ("unknown_topic", 404, "NOT_FOUND"),
    ("unknown_user", 404, "NOT_FOUND"), ("unsupported_media_type", 415, "INVALID_ARGUMENT"),
    ("user_exists", 409, "ALREADY_EXISTS"), ("user_owns_topics", 409, "FAILED_PRECONDITION"),
]


def _subclasses(root: type) -> Iterator[type]:
    for cls in root.__subclasses__():
        yield cls
        yield from _subclasses(cls)


def error_classes() -> set[type]:
    """Every typed error class of the project's packages (a forwarded ``RemoteError`` carries
    another class's code, so it has no row of its own)."""
    found = {cls for root in ANY_ERROR for cls in (root, *_subclasses(root))}
    return {cls for cls in found if cls.__module__.split(".")[0] in PROJECT and cls is not RemoteError}


def test_every_error_class_of_logbroker_errors_has_exactly_one_row():
    named = {value for value in vars(errors).values()
             if isinstance(value, type) and issubclass(value, ANY_ERROR) and value is not RemoteError}
    assert len(named) >= 40
    for cls in named:
        assert list(ANSWERS).count(cls.code) == 1, cls


def test_every_error_class_anywhere_has_a_row_and_every_row_a_class():
    classes = error_classes()
    assert {cls.code for cls in classes} == set(ANSWERS), (
        {cls.__name__ for cls in classes if cls.code not in ANSWERS}, set(ANSWERS) - {cls.code for cls in classes})


def test_the_rows_are_what_the_apis_answered_before_the_table():
    assert sorted((code, a.http, a.grpc) for code, a in ANSWERS.items()) == BEFORE


@pytest.mark.parametrize(("code", "http", "grpc_name"), BEFORE)
def test_both_apis_answer_each_code_as_its_row_says(code, http, grpc_name):
    answer = answer_of(code)
    assert (answer.http, answer.grpc) == (http, grpc_name)
    assert problem_for(RemoteError(code, "detail", retriable=False)).status == http
    assert status_details(code, "detail")[0] == grpc.StatusCode[grpc_name]


def test_an_unknown_code_is_an_internal_error_in_both():
    assert answer_of("no_such_code") is INTERNAL
    assert problem_for(RemoteError("no_such_code", "x", retriable=False)).status == 500
    assert status_details("no_such_code", "x")[0] == grpc.StatusCode.INTERNAL


@pytest.mark.parametrize("code", sorted(code for code, a in ANSWERS.items() if a.retry_after_s is not None))
def test_a_retriable_code_advises_one_wait_in_both_apis(code):
    """storage_full advised 5 s over HTTP and 1 s over gRPC before the table (decision 0345)."""
    wait = ANSWERS[code].retry_after_s
    assert wait is not None
    response = problem_for(RemoteError(code, "later", retriable=True))
    assert json.loads(response.body)["retry_after_s"] == wait  # type: ignore[arg-type]
    _, _, trailing = status_details(code, "later", retriable=True)
    assert dict(trailing)[RETRY_KEY] == str(round(wait * 1000))


def test_a_problem_body_is_as_it_was():
    response = problem_for(errors.NotLeaderError("node 2 leads it now"))
    assert json.loads(response.body) == {  # type: ignore[arg-type]
        "type": "https://logbroker.dev/errors/not_leader", "title": "Service Unavailable", "status": 503,
        "detail": "node 2 leads it now", "code": "not_leader", "retriable": True, "retry_after_s": 0.2}
    assert response.headers["Retry-After"] == "1" and response.content_type == "application/problem+json"
    full = json.loads(problem_for(RemoteError("storage_full", "disk full", retriable=True)).body)  # type: ignore[arg-type]
    assert full["retry_after_s"] == 5 and isinstance(full["retry_after_s"], int)
