"""When the client sends a failed call again (pure): which failures, how often, how long it waits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.client.errors import LogBrokerError, UnreachableError, problem_error
from logbroker.client.routing import (
    CLUSTER_CODES,
    Failure,
    RetryPolicy,
    backoff_s,
    classify,
    decide,
    produce_refused,
)

POLICY = RetryPolicy(attempts=4, backoff_s=0.1, backoff_max_s=1.0, retry_after_max_s=3.0)


def answer(status: int, code: str, retry_after: str | None = None) -> LogBrokerError:
    body = json.dumps({"type": f"https://logbroker.dev/errors/{code}", "status": status, "detail": "x",
                       "code": code, "retriable": status >= 500}).encode()
    return problem_error(status, body, {"Retry-After": retry_after} if retry_after else None)


def ambiguous() -> LogBrokerError:
    return LogBrokerError(0, "transport", "timed out", retriable=True)


@pytest.mark.parametrize("code", sorted(CLUSTER_CODES))
def test_cluster_errors_are_retried_after_a_metadata_refresh_whatever_the_call(code):
    for idempotent in (True, False):
        decision = decide(answer(503, code), 0, POLICY, idempotent=idempotent)
        assert decision.retry and decision.refresh and not decision.mark_down


def test_a_cluster_code_is_read_from_the_type_when_the_code_is_missing():
    error = problem_error(503, json.dumps({"type": "https://logbroker.dev/errors/no_leader", "status": 503}).encode())
    assert classify(error) is Failure.CLUSTER


def test_an_unreachable_node_is_retried_elsewhere_at_once_whatever_the_call():
    decision = decide(UnreachableError("http://a:1", "refused"), 0, POLICY, idempotent=False)
    assert decision.retry and decision.refresh and decision.mark_down and decision.delay_s == 0
    assert decide(UnreachableError("http://a:1", "refused"), 1, POLICY, idempotent=False).delay_s > 0


def test_a_timeout_after_sending_is_retried_only_for_a_read():
    assert not decide(ambiguous(), 0, POLICY, idempotent=False).retry
    decision = decide(ambiguous(), 0, POLICY, idempotent=True)
    assert decision.retry and not decision.refresh and not decision.mark_down


@pytest.mark.parametrize(("status", "code"), [(400, "invalid_request"), (401, "unauthenticated"),
                                              (404, "unknown_topic"), (409, "stale_generation"),
                                              (429, "too_many_requests"), (500, "internal"),
                                              (503, "storage_busy"), (503, "log_closed"), (500, "not_leader"),
                                              (502, "error"), (504, "error")])
def test_other_answers_are_not_retried(status, code):
    assert classify(answer(status, code)) is Failure.FINAL
    assert not decide(answer(status, code), 0, POLICY, idempotent=True).retry


@given(st.integers(0, 20), st.sampled_from(sorted(CLUSTER_CODES)), st.booleans())
def test_attempts_are_bounded(attempt, code, idempotent):
    for error, read in ((answer(503, code), idempotent), (UnreachableError("http://a:1", "refused"), idempotent),
                        (ambiguous(), True)):
        assert decide(error, attempt, POLICY, idempotent=read).retry == (attempt + 1 < POLICY.attempts)


def test_retry_after_is_honoured_and_capped():
    assert decide(answer(503, "not_leader", "2"), 0, POLICY, idempotent=False).delay_s == 2.0
    assert decide(answer(503, "not_leader", "600"), 0, POLICY, idempotent=False).delay_s == 3.0
    assert answer(503, "not_leader", "soon").retry_after_s is None
    assert answer(503, "not_leader", "nan").retry_after_s is None


def test_the_bodys_exact_wait_wins_over_the_headers_whole_seconds():
    def with_body(wait: object) -> LogBrokerError:
        body = json.dumps({"code": "not_leader", "detail": "x", "retry_after_s": wait}).encode()
        return problem_error(503, body, {"Retry-After": "1"})

    assert with_body(0.2).retry_after_s == 0.2
    assert decide(with_body(0.2), 0, POLICY, idempotent=False).delay_s == 0.2
    for bad in ("0.2", -1, True, None):
        assert with_body(bad).retry_after_s == 1.0


@given(st.integers(0, 100), st.floats(0, 1), st.none() | st.floats(0, 1e9))
def test_backoff_grows_within_its_bounds(attempt, jitter, retry_after):
    delay = backoff_s(attempt, POLICY, retry_after, jitter)
    assert 0 <= delay <= max(POLICY.backoff_max_s, POLICY.retry_after_max_s)
    if retry_after is None:
        assert min(POLICY.backoff_s * 2 ** min(attempt, 32) / 2, POLICY.backoff_max_s) <= delay <= POLICY.backoff_max_s
        assert backoff_s(attempt + 1, POLICY, None, jitter) >= delay


def test_the_producer_resends_only_what_a_node_refused_before_appending():
    assert produce_refused(answer(429, "too_many_requests"))
    assert produce_refused(answer(503, "too_many_connections"))
    assert not produce_refused(answer(503, "storage_busy"))  # may come after the append
    assert not produce_refused(ambiguous())
    assert not produce_refused(answer(504, "error"))
    assert not produce_refused(answer(503, "not_leader"))  # the client's own retry


@pytest.mark.parametrize("settings", [{"attempts": 0}, {"backoff_s": -1}, {"backoff_s": 3, "backoff_max_s": 2},
                                      {"retry_after_max_s": -1}])
def test_a_policy_is_checked(settings):
    with pytest.raises(ValueError):
        RetryPolicy(**settings)
