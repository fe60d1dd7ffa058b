"""Supervised background loops: a failing round is counted and retried with a bounded backoff,
a successful one resets it, and only cancellation ends the loop (no real sleeping)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.supervisor import BACKOFF_MAX_S, backoff_s, run_supervised


@given(interval=st.floats(0.001, 10), failures=st.integers(0, 10_000), maximum=st.floats(0.001, 100))
def test_backoff_is_the_interval_when_healthy_and_bounded_when_failing(interval, failures, maximum):
    pause = backoff_s(interval, failures, maximum)
    if failures == 0:
        assert pause == interval
    else:
        assert interval <= pause <= max(interval, maximum)
        assert backoff_s(interval, failures + 1, maximum) >= pause


def test_a_failing_round_is_counted_retried_with_backoff_and_reset_by_a_success():
    outcomes = iter([ValueError("boom"), KeyError("x"), None, RuntimeError("again"), None, None])
    pauses: list[float] = []
    failures: list[str] = []
    rounds = 0

    async def round_() -> None:
        nonlocal rounds
        rounds += 1
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) > 6:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run_supervised("maintenance", round_, 1.0, on_failure=failures.append, sleep=sleep))
    assert rounds == 6 and failures == ["maintenance"] * 3
    assert pauses == [1.0, 2.0, 4.0, 1.0, 2.0, 1.0, 1.0]


def test_the_backoff_stops_at_its_maximum():
    assert backoff_s(1.0, 100) == BACKOFF_MAX_S
    assert backoff_s(0.05, 100, 2.0) == 2.0
