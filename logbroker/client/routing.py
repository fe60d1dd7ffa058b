"""When the client sends a failed call again, and after how long (pure: no I/O).

A call is retried only when sending it again cannot do a thing twice:

- a cluster error (503 whose problem code is ``not_leader``, ``no_leader``, ``not_enough_replicas``
  or ``coordinator_unavailable``): the node says it did nothing (DESIGN §4, §6); the client reads
  the metadata again first, since a leader probably moved;
- an ``UnreachableError``: no connection was made, so nothing was sent; the node is tried last for
  a while and the metadata read again;
- any other transport failure (a timeout or a connection lost after sending) only when the call
  is idempotent (a read): a write may have been applied, and sending it again could store it twice.

Nothing else is retried here (4xx answers, 500, 429 quotas: the caller decides). Attempts are
bounded by ``RetryPolicy.attempts``; waits grow exponentially up to ``backoff_max_s``, and a
node's ``Retry-After`` is honoured up to ``retry_after_max_s``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Final

from logbroker.client.errors import LogBrokerError, UnreachableError

CLUSTER_CODES: Final = frozenset({"not_leader", "no_leader", "not_enough_replicas", "coordinator_unavailable"})
# Answers of a node that refused a produce before appending anything (the Producer retries them):
# a user's quota in debt, the connection table full. (``storage_busy`` is not one: it can come
# after the append, while waiting for the flush.)
REFUSED_CODES: Final = frozenset({"too_many_requests", "too_many_connections"})


class Failure(enum.Enum):
    CLUSTER = "cluster"  # a node did nothing: leadership or replicas are changing
    UNREACHABLE = "unreachable"  # nothing was sent
    AMBIGUOUS = "ambiguous"  # sent, outcome unknown
    FINAL = "final"  # an answer that sending again would not change


def classify(error: LogBrokerError) -> Failure:
    if isinstance(error, UnreachableError):
        return Failure.UNREACHABLE
    if error.status == 0:
        return Failure.AMBIGUOUS
    if error.status == 503 and problem_code(error) in CLUSTER_CODES:
        return Failure.CLUSTER
    return Failure.FINAL


def problem_code(error: LogBrokerError) -> str:
    """The problem's code, or else the last part of its ``type`` URI."""
    if error.code in CLUSTER_CODES or error.code not in ("", "error"):
        return error.code
    kind = error.extra.get("type")
    return kind.rstrip("/").rsplit("/", 1)[-1] if isinstance(kind, str) else error.code


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a call is sent again (``attempts`` counts the first try)."""

    attempts: int = 6
    backoff_s: float = 0.05
    backoff_max_s: float = 2.0
    retry_after_max_s: float = 5.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts is at least 1")
        if not 0 <= self.backoff_s <= self.backoff_max_s or self.retry_after_max_s < 0:
            raise ValueError("backoffs are not negative and backoff_s <= backoff_max_s")


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    retry: bool
    delay_s: float = 0.0
    refresh: bool = False  # read the metadata again before the next try
    mark_down: bool = False  # try the node that failed last for a while


GIVE_UP: Final = Decision(False)


def decide(error: LogBrokerError, attempt: int, policy: RetryPolicy, *, idempotent: bool,
           jitter: float = 1.0) -> Decision:
    """What to do after try number ``attempt`` (0 for the first) failed with ``error``.
    ``jitter`` in [0, 1] scales the computed backoff (a random draw spreads clients apart)."""
    failure = classify(error)
    if attempt + 1 >= policy.attempts or failure is Failure.FINAL or (failure is Failure.AMBIGUOUS and not idempotent):
        return GIVE_UP
    if failure is Failure.UNREACHABLE:
        # Another node may answer at once: no wait for the first switch.
        delay = 0.0 if attempt == 0 else backoff_s(attempt - 1, policy, None, jitter)
        return Decision(True, delay, refresh=True, mark_down=True)
    return Decision(True, backoff_s(attempt, policy, error.retry_after_s, jitter), refresh=failure is Failure.CLUSTER)


def backoff_s(attempt: int, policy: RetryPolicy, retry_after_s: float | None, jitter: float = 1.0) -> float:
    """The wait before try ``attempt + 1``: the node's ``Retry-After`` (capped) when given, else
    ``backoff_s * 2**attempt`` scaled by ``jitter`` (at least half of it), capped."""
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), policy.retry_after_max_s)
    exponential = policy.backoff_s * 2.0 ** min(attempt, 32)
    return min(exponential * (0.5 + 0.5 * min(max(jitter, 0.0), 1.0)), policy.backoff_max_s)


# With idempotent produce a resend is stored once, so these may be sent again too: no answer
# after sending (status 0), a write whose outcome the broker could not tell, a leader change.
RESEND_CODES: Final = frozenset({"transport", "forward_outcome_unknown", "replication_timeout", "not_leader",
                                 "no_leader", "not_enough_replicas", "coordinator_unavailable", "not_available"})


def idempotent_resend(error: LogBrokerError) -> bool:
    """An idempotent batch may be sent again after ``error`` (the broker de-duplicates it)."""
    return produce_refused(error) or problem_code(error) in RESEND_CODES


def produce_refused(error: LogBrokerError) -> bool:
    """A produce the node refused before appending (a quota in debt, a full connection table):
    the ``Producer`` may send it again. Cluster errors and unreachable nodes are the
    client's own retries, and a transport failure after sending is never retried (the batch may
    be stored already)."""
    return error.status in (429, 503) and problem_code(error) in REFUSED_CODES
