"""The per-user budget of password changes (``logbroker.auth.password_changes``), on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.auth.password_changes import BURST, INTERVAL_S, PasswordChanges
from logbroker.errors import TooManyRequestsError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_per_interval_and_others_are_not_touched():
    clock = Clock()
    changes = PasswordChanges(clock)
    for _ in range(BURST):
        changes.take("ann")
    with pytest.raises(TooManyRequestsError, match="'ann'") as refused:
        changes.take("ann")
    assert refused.value.retry_after_s == pytest.approx(INTERVAL_S)
    changes.take("bob")
    clock.now += INTERVAL_S / 2
    with pytest.raises(TooManyRequestsError) as refused:
        changes.take("ann")
    assert refused.value.retry_after_s == pytest.approx(INTERVAL_S / 2)
    clock.now += INTERVAL_S / 2
    changes.take("ann")
    clock.now += 100 * INTERVAL_S
    for _ in range(BURST):  # never more than the burst, however long the pause
        changes.take("ann")
    with pytest.raises(TooManyRequestsError):
        changes.take("ann")


@given(st.lists(st.floats(min_value=0, max_value=3 * INTERVAL_S), max_size=60))
def test_attempts_admitted_never_exceed_the_burst_plus_the_refill(gaps):
    clock = Clock()
    changes = PasswordChanges(clock)
    admitted = 0
    for gap in gaps:
        clock.now += gap
        try:
            changes.take("ann")
            admitted += 1
        except TooManyRequestsError as exc:
            assert 0 < exc.retry_after_s <= INTERVAL_S + 0.001
    assert admitted <= BURST + sum(gaps) / INTERVAL_S + 1e-9
