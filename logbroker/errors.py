"""The broker's error tree: one ``BrokerError`` root; each class has a stable ``code`` and a
``retriable`` flag. Storage and coordination errors keep their own roots (their packages sit
below this one) but follow the same protocol; ``logbroker.error_codes`` gives every code its HTTP
and its gRPC status in one table (a row per code), and ``internal_rpc`` sends the code across the
wire."""

from __future__ import annotations

from typing import Any

from coordinator.errors import (
    CoordinatorError,
    CoordinatorUnavailableError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from segments.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    InvalidArgumentError,
    InvalidBatchError,
    OffsetOutOfRangeError,
    StorageError,
    UndecryptableBatchError,
)


class BrokerError(Exception):
    code = "broker_error"
    retriable = False

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class InvalidRequestError(BrokerError):
    """The request is malformed: bad JSON/msgpack, a wrong field, a bad query parameter."""

    code = "invalid_request"


class InvalidTimestampError(BrokerError):
    """A produced record's timestamp lies outside the window its topic accepts around the broker's
    clock (``timestamp_after_max_ms``, ``timestamp_before_max_ms``; decision 0221)."""

    code = "invalid_timestamp"


class UnsupportedMediaTypeError(BrokerError):
    code = "unsupported_media_type"


class PayloadTooLargeError(BrokerError):
    code = "payload_too_large"


class UnknownPartitionError(BrokerError):
    code = "unknown_partition"


class NotFoundError(BrokerError):
    code = "not_found"


class NotAvailableError(BrokerError):
    """The node cannot serve this now (starting, stopping, a bounded queue is full)."""

    code = "not_available"
    retriable = True


class NotAClusterError(BrokerError):
    """A cluster operation (rebalance, decommission) on a single node: no retry can succeed."""

    code = "not_a_cluster"


class LeaseExpiredError(BrokerError):
    """A queue ack or nack whose receipts' leases all ran out: nothing was settled, since each
    message may already be leased to another receiver. ``failed`` lists the receipts."""

    code = "lease_expired"


class UnknownGroupError(BrokerError):
    code = "unknown_group"


class UnknownMemberError(BrokerError):
    """The member id is not (or no longer) in the group: it left, timed out or never joined.
    The member must join again."""

    code = "unknown_member"


class StaleGenerationError(BrokerError):
    """The caller acted on a generation the group has moved past (it missed a rebalance)."""

    code = "stale_generation"


class NotAssignedError(BrokerError):
    """The member commits a partition that is not assigned to it in this generation."""

    code = "not_assigned"


class GroupNotEmptyError(BrokerError):
    code = "group_not_empty"


class InconsistentStrategyError(BrokerError):
    code = "inconsistent_strategy"


class NotAQueueError(BrokerError):
    """A queue call names a topic whose kind is not ``queue``."""

    code = "not_a_queue"


class DeadLetterRefusedError(BrokerError):
    """A queue's dead-letter topic may not take its dead messages: the topic it is bound to (by id)
    is gone, or the queue's owner may no longer write to it (decision 0173). ``reason`` is
    ``gone`` or ``forbidden``."""

    code = "dead_letter_refused"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class AuthenticationError(BrokerError):
    code = "unauthenticated"


class ForbiddenError(BrokerError):
    code = "forbidden"


class TooManyRequestsError(BrokerError):
    """A quota or a bound on concurrent work is exhausted; ``retry_after_s`` says when to retry."""

    code = "too_many_requests"
    retriable = True

    def __init__(self, message: str, *, retry_after_s: float, **extra: Any) -> None:
        super().__init__(message, retry_after_s=retry_after_s, **extra)
        self.retry_after_s = retry_after_s


class StorageQuotaExceededError(BrokerError):
    """A write would take the owner of its topic past their ``storage_bytes_max``; nothing was
    stored. Not retriable: waiting frees nothing unless retention runs, and a client retrying it
    would only spin (the owner frees space or an admin raises the limit)."""

    code = "storage_quota_exceeded"


class TooManyConnectionsError(BrokerError):
    """The node holds ``connections_max`` connections; a new one is refused before any request."""

    code = "too_many_connections"
    retriable = True


class RequestTimeoutError(BrokerError):
    """A request body did not arrive within ``body_timeout_ms``; the connection is closed."""

    code = "request_timeout"


class NotLeaderError(BrokerError):
    """This node (or the node a request was forwarded to) does not lead the partition now."""

    code = "not_leader"
    retriable = True


class NoLeaderError(BrokerError):
    """The partition has no live leader now (an election is due or its node is unreachable)."""

    code = "no_leader"
    retriable = True


class NotEnoughReplicasError(BrokerError):
    """``acks=all`` with fewer in-sync replicas than the topic's ``min_insync_replicas``: nothing
    was stored (checked before the append), or the ISR shrank below it while the write waited."""

    code = "not_enough_replicas"
    retriable = True


class ReplicationTimeoutError(BrokerError):
    """An ``acks=all`` write was stored on the leader but its followers did not confirm it in
    time: it may still become visible. Not retriable without de-duplication."""

    code = "replication_timeout"


class IdempotencyConflictError(BrokerError):
    """A produce reused an ``Idempotency-Key`` (or a producer's sequence) for different records
    within the de-duplication window; nothing was stored."""

    code = "idempotency_conflict"


class OutOfOrderSequenceError(BrokerError):
    """A sequenced producer's batch does not start where its previous one in the partition ended
    (a batch before it was lost, or it overtook one): nothing was stored (Kafka's
    OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    code = "out_of_order_sequence"


class PartialWriteError(BrokerError):
    """A produce spanning partitions on several nodes was stored on some and failed on others:
    not retriable as a whole (a resend would store the stored part twice). ``results`` lists
    each partition's offset or error."""

    code = "partial_write"


class ForwardOutcomeUnknownError(BrokerError):
    """A forwarded write got no answer (deadline, lost connection after sending): the leader may
    have stored it. Not retriable without de-duplication."""

    code = "forward_outcome_unknown"


class RemoteError(BrokerError):
    """An error another node answered to a forwarded call: its ``code``, ``retriable`` flag and
    details travel unchanged, so the caller fails exactly as a local call would."""

    def __init__(self, code: str, message: str, *, retriable: bool, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.code = code
        self.retriable = retriable


ANY_ERROR = (BrokerError, StorageError, CoordinatorError)

__all__ = [
    "ANY_ERROR",
    "AuthenticationError",
    "BatchTooLargeError",
    "BrokerError",
    "CoordinatorError",
    "CoordinatorUnavailableError",
    "CorruptBatchError",
    "ForbiddenError",
    "ForwardOutcomeUnknownError",
    "GroupNotEmptyError",
    "InconsistentStrategyError",
    "InvalidArgumentError",
    "InvalidBatchError",
    "InvalidRequestError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "NoLeaderError",
    "NotAQueueError",
    "NotAssignedError",
    "NotAvailableError",
    "NotFoundError",
    "NotLeaderError",
    "OffsetOutOfRangeError",
    "PartialWriteError",
    "PayloadTooLargeError",
    "RemoteError",
    "RequestTimeoutError",
    "StaleGenerationError",
    "StorageError",
    "StorageQuotaExceededError",
    "TooManyConnectionsError",
    "TooManyRequestsError",
    "TopicExistsError",
    "UndecryptableBatchError",
    "UnknownGroupError",
    "UnknownMemberError",
    "UnknownPartitionError",
    "UnknownTopicError",
    "UnsupportedMediaTypeError",
]
