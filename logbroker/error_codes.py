"""The one table from error code to the status each public API answers it with.

Every typed error (``logbroker.errors`` and the storage and coordination errors it re-exports)
carries a stable ``code``; this table gives each code exactly one row: its HTTP status
(``http_api.errors`` writes the problem+json), its gRPC status code by name (``grpc_api.errors``
turns the name into ``grpc.StatusCode``, so this module needs no gRPC import) and its Kafka error
code (``kafka_api``; the numbers of Kafka's ``Errors`` table, named once in
``logbroker.kafka_error_numbers``, the retriable ones where a Kafka client should refresh its
metadata and retry). A code with no row is
a bug, answered as 500 / INTERNAL; a test checks every error class has its row. Pure data: no I/O.

Both APIs say the same thing, each in its own words: a 409 conflict is FAILED_PRECONDITION except
for names that exist already (ALREADY_EXISTS); a quota no wait refills is 403 over HTTP and, in
gRPC's words, RESOURCE_EXHAUSTED; a partition holding a batch this node cannot decrypt is 503 over
HTTP (the partition is unavailable) and FAILED_PRECONDITION over gRPC (no retry helps until its key
is back, decision 0316).
"""

from __future__ import annotations

import dataclasses
from typing import Final, Literal

from logbroker import kafka_error_numbers as kafka_errors

GrpcCode = Literal["INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "ALREADY_EXISTS",
                   "FAILED_PRECONDITION", "DEADLINE_EXCEEDED", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED", "ABORTED",
                   "UNAVAILABLE", "INTERNAL"]


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """How both APIs answer one error code: the status, and for a retriable one the wait both
    advise when the error names none of its own (None: HTTP advises none, gRPC its default)."""

    http: int
    grpc: GrpcCode
    retry_after_s: float | None = None
    kafka: int = kafka_errors.UNKNOWN_SERVER_ERROR


INTERNAL: Final = Answer(500, "INTERNAL")
_BAD = Answer(400, "INVALID_ARGUMENT", kafka=kafka_errors.INVALID_REQUEST)
_CORRUPT = Answer(400, "INVALID_ARGUMENT", kafka=kafka_errors.CORRUPT_MESSAGE)
_TOO_LARGE = Answer(413, "INVALID_ARGUMENT", kafka=kafka_errors.MESSAGE_TOO_LARGE)
_MISSING = Answer(404, "NOT_FOUND", kafka=kafka_errors.UNKNOWN_TOPIC_OR_PARTITION)
_CONFLICT = Answer(409, "FAILED_PRECONDITION", kafka=kafka_errors.INVALID_REQUEST)
_EXISTS = Answer(409, "ALREADY_EXISTS", kafka=kafka_errors.TOPIC_ALREADY_EXISTS)
_UNAVAILABLE = Answer(503, "UNAVAILABLE", kafka=kafka_errors.KAFKA_STORAGE_ERROR)
# A cluster's retriable 503s (DESIGN §4): the client refreshes its metadata and retries after this.
# Leadership moves in well under a second once decided: the exact wait in the body and in gRPC's
# retry details; HTTP's header rounds it up.
CLUSTER_RETRY_AFTER_S: Final = 0.2
_CLUSTER_MOVING = Answer(503, "UNAVAILABLE", CLUSTER_RETRY_AFTER_S, kafka_errors.LEADER_NOT_AVAILABLE)
STORAGE_FULL_RETRY_AFTER_S: Final = 5  # a disk fills up slowly and frees up slowly: no quick retry
_UNKNOWN_OUTCOME = Answer(504, "DEADLINE_EXCEEDED", kafka=kafka_errors.REQUEST_TIMED_OUT)

ANSWERS: Final[dict[str, Answer]] = {
    # malformed input
    "invalid_request": _BAD,
    "invalid_argument": _BAD,
    "invalid_batch": _CORRUPT,
    "invalid_timestamp": Answer(400, "INVALID_ARGUMENT", kafka=kafka_errors.INVALID_TIMESTAMP),
    "corrupt_batch": _CORRUPT,
    "invalid_topic": Answer(400, "INVALID_ARGUMENT", kafka=kafka_errors.INVALID_TOPIC_EXCEPTION),
    "invalid_user": _BAD,
    "batch_too_large": _TOO_LARGE,
    "payload_too_large": _TOO_LARGE,
    "unsupported_media_type": Answer(415, "INVALID_ARGUMENT", kafka=kafka_errors.INVALID_REQUEST),
    "request_timeout": Answer(408, "DEADLINE_EXCEEDED", kafka=kafka_errors.REQUEST_TIMED_OUT),
    # who may
    "unauthenticated": Answer(401, "UNAUTHENTICATED", kafka=kafka_errors.SASL_AUTHENTICATION_FAILED),
    "forbidden": Answer(403, "PERMISSION_DENIED", kafka=kafka_errors.TOPIC_AUTHORIZATION_FAILED),
    "storage_quota_exceeded": Answer(403, "RESOURCE_EXHAUSTED", kafka=kafka_errors.POLICY_VIOLATION),
    "too_many_requests": Answer(429, "RESOURCE_EXHAUSTED", kafka=kafka_errors.THROTTLING_QUOTA_EXCEEDED),
    # what is not there, or already is
    "not_found": _MISSING,
    "unknown_topic": _MISSING,
    "unknown_partition": _MISSING,
    "unknown_group": Answer(404, "NOT_FOUND", kafka=kafka_errors.GROUP_ID_NOT_FOUND),
    "unknown_member": Answer(404, "NOT_FOUND", kafka=kafka_errors.UNKNOWN_MEMBER_ID),
    "unknown_user": _MISSING,
    "offset_out_of_range": Answer(416, "OUT_OF_RANGE", kafka=kafka_errors.OFFSET_OUT_OF_RANGE),
    "topic_exists": _EXISTS,
    "user_exists": Answer(409, "ALREADY_EXISTS", kafka=kafka_errors.INVALID_REQUEST),
    # the state does not allow it
    "user_owns_topics": _CONFLICT,
    "stale_leader_epoch": Answer(409, "FAILED_PRECONDITION", kafka=kafka_errors.FENCED_LEADER_EPOCH),
    "non_sequential_append": Answer(409, "FAILED_PRECONDITION"),
    "stale_generation": Answer(409, "FAILED_PRECONDITION", kafka=kafka_errors.ILLEGAL_GENERATION),
    "not_assigned": _CONFLICT,
    "group_not_empty": Answer(409, "FAILED_PRECONDITION", kafka=kafka_errors.NON_EMPTY_GROUP),
    "inconsistent_strategy": Answer(409, "FAILED_PRECONDITION", kafka=kafka_errors.INCONSISTENT_GROUP_PROTOCOL),
    "not_a_queue": _CONFLICT,
    "idempotency_conflict": _CONFLICT,
    "out_of_order_sequence": Answer(409, "FAILED_PRECONDITION", kafka=kafka_errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
    "dead_letter_refused": _CONFLICT,
    "lease_expired": _CONFLICT,
    "not_a_cluster": _CONFLICT,
    # not now: retry (here or elsewhere)
    "not_available": Answer(503, "UNAVAILABLE", kafka=kafka_errors.LEADER_NOT_AVAILABLE),
    "too_many_connections": Answer(503, "UNAVAILABLE", kafka=kafka_errors.THROTTLING_QUOTA_EXCEEDED),
    "log_closed": _UNAVAILABLE,
    "storage_busy": _UNAVAILABLE,
    "log_offline": _UNAVAILABLE,
    "too_many_open_files": _UNAVAILABLE,
    "coordinator_unavailable": _CLUSTER_MOVING,
    "not_leader": Answer(503, "UNAVAILABLE", CLUSTER_RETRY_AFTER_S, kafka_errors.NOT_LEADER_OR_FOLLOWER),
    "no_leader": _CLUSTER_MOVING,
    "not_enough_replicas": Answer(503, "UNAVAILABLE", CLUSTER_RETRY_AFTER_S, kafka_errors.NOT_ENOUGH_REPLICAS),
    "undecryptable_batch": Answer(503, "FAILED_PRECONDITION", kafka=kafka_errors.KAFKA_STORAGE_ERROR),
    "storage_full": Answer(507, "RESOURCE_EXHAUSTED", STORAGE_FULL_RETRY_AFTER_S, kafka_errors.KAFKA_STORAGE_ERROR),
    # a write whose outcome is partly or wholly unknown
    "partial_write": Answer(502, "ABORTED"),
    "forward_outcome_unknown": _UNKNOWN_OUTCOME,
    "replication_timeout": _UNKNOWN_OUTCOME,
    # the roots and the errors no caller can act on: a bug or a broken disk, answered as one
    "broker_error": INTERNAL,
    "storage_error": INTERNAL,
    "coordinator_error": INTERNAL,
    "corrupt_checkpoint": INTERNAL,
    "segment_write_failed": INTERNAL,
}


def answer_of(code: str) -> Answer:
    """The row of ``code``; a code with none (a bug) is answered as an internal error."""
    return ANSWERS.get(code, INTERNAL)
