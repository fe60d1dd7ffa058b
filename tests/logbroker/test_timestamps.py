"""The timestamp window (pure): a topic's bounds around the broker's clock (decision 0221)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import InvalidTimestampError
from logbroker.timestamps import TimestampWindow

NOW = 1_800_000_000_000
HOUR = 3_600_000


def test_the_default_is_an_hour_ahead_and_no_bound_behind() -> None:
    window = TimestampWindow.of({})
    assert window == (HOUR, -1)
    window.check(0, NOW + HOUR, NOW)
    with pytest.raises(InvalidTimestampError) as caught:
        window.check(NOW, NOW + HOUR + 1, NOW)
    assert caught.value.code == "invalid_timestamp" and caught.value.extra["limit_ms"] == HOUR


@given(st.integers(-1, 10 * HOUR), st.integers(-1, 10 * HOUR), st.lists(st.integers(-(2**62), 2**62) | st.none(),
                                                                         max_size=5))
def test_a_batch_passes_exactly_when_every_timestamp_lies_in_the_window(after, before, stamps) -> None:
    window = TimestampWindow.of({"timestamp_after_max_ms": after, "timestamp_before_max_ms": before})
    inside = all(t is None or ((after == -1 or t <= NOW + after) and (before == -1 or t >= NOW - before))
                 for t in stamps)
    if inside:
        window.check_all(stamps, NOW)
    else:
        with pytest.raises(InvalidTimestampError):
            window.check_all(stamps, NOW)
