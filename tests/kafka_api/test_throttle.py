"""A Kafka call over its quota is slowed, not failed (``kafka_api.handlers.Throttle``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kafka_api.handlers import Throttle
from logbroker.errors import TooManyRequestsError


def refusing(times: int, retry_after_s: float) -> tuple[list[int], Callable[[], Awaitable[str]]]:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise TooManyRequestsError("over the fetch quota", retry_after_s=retry_after_s)
        return "read"
    return calls, attempt


def test_a_refused_call_waits_the_named_time_and_is_tried_again() -> None:
    calls, attempt = refusing(2, 0.02)
    throttle = Throttle(5.0)
    assert asyncio.run(throttle.call(attempt)) == "read"
    assert len(calls) == 3 and throttle.ms >= 40, "both waits count in throttle_time_ms"


def test_a_refusal_of_a_hair_still_waits_a_little_not_spins() -> None:
    calls, attempt = refusing(1, 0.0)
    throttle = Throttle(5.0)
    assert asyncio.run(throttle.call(attempt)) == "read"
    assert len(calls) == 2 and throttle.ms >= 5


def test_the_refusal_stands_past_the_deadline() -> None:
    calls, attempt = refusing(100, 0.05)
    throttle = Throttle(0.12)
    with pytest.raises(TooManyRequestsError):
        asyncio.run(throttle.call(attempt))
    assert 2 <= len(calls) <= 4 and throttle.ms <= 130
