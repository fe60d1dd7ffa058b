"""Login throttling without I/O: backoff per username and (username, address) pair, never per address
alone; trusted pairs; bounds."""

from __future__ import annotations

import pytest

from logbroker.auth.login_throttle import BACKOFF_MAX_S, FORGET_S, FREE_FAILURES, IN_FLIGHT_MAX, LoginThrottle
from logbroker.errors import TooManyRequestsError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def attempt(throttle: LoginThrottle, user: str, address: str, ok: bool) -> bool:
    """One whole attempt; False when it was refused before checking the password."""
    try:
        trusted = throttle.begin(user, address)
    except TooManyRequestsError:
        return False
    throttle.end(user, address, trusted, ok)
    return True


def test_failures_on_one_name_back_off_exponentially_and_are_forgotten():
    clock = Clock()
    throttle = LoginThrottle(clock)
    for i in range(FREE_FAILURES["user"]):
        assert attempt(throttle, "ann", f"10.0.0.{i}", ok=False)  # from ever new addresses
    assert attempt(throttle, "ann", "10.0.0.9", ok=False), "free failures are not blocked"
    with pytest.raises(TooManyRequestsError, match="for user 'ann'") as refused:
        throttle.begin("ann", "10.0.1.1")
    assert 0 < refused.value.retry_after_s <= 1
    waits = []
    for i in range(12):
        clock.now += BACKOFF_MAX_S
        assert attempt(throttle, "ann", f"10.0.2.{i}", ok=False)
        try:
            throttle.begin("ann", "10.0.3.1")
        except TooManyRequestsError as exc:
            waits.append(exc.retry_after_s)
    assert waits == sorted(waits) and waits[-1] == BACKOFF_MAX_S and waits[1] == 2 * waits[0]
    clock.now += FORGET_S + BACKOFF_MAX_S + 1
    assert attempt(throttle, "ann", "10.0.4.1", ok=False), "old failures are forgotten"
    assert attempt(throttle, "ann", "10.0.4.1", ok=True)


def test_a_trusted_pair_is_not_locked_out_by_others_failures():
    clock = Clock()
    throttle = LoginThrottle(clock)
    assert attempt(throttle, "admin", "10.0.0.1", ok=True)
    for i in range(50):  # someone guesses admin's password elsewhere, and sprays names from admin's address
        attempt(throttle, "admin", "10.9.9.9", ok=False)
        attempt(throttle, f"user{i}", "10.0.0.1", ok=False)
    with pytest.raises(TooManyRequestsError):
        throttle.begin("admin", "10.9.9.9")
    assert throttle.begin("admin", "10.0.0.1") is True, "admin from where they logged in before"
    throttle.end("admin", "10.0.0.1", True, True)
    for _ in range(FREE_FAILURES["pair"] + 1):  # but guesses from a trusted pair still back off
        attempt(throttle, "admin", "10.0.0.1", ok=False)
    with pytest.raises(TooManyRequestsError, match=r"for user 'admin' from 10\.0\.0\.1"):
        throttle.begin("admin", "10.0.0.1")


def test_attempts_in_flight_are_bounded_and_unchecked_ones_count_nothing():
    throttle = LoginThrottle(Clock())
    for _ in range(IN_FLIGHT_MAX["user"]):
        assert throttle.begin("ann", "10.0.0.1") is False
    with pytest.raises(TooManyRequestsError, match="at once for user 'ann'"):
        throttle.begin("ann", "10.0.0.2")
    throttle.end("ann", "10.0.0.1", False, None)
    assert throttle.begin("ann", "10.0.0.2") is False, "an ended attempt frees its place"
    assert attempt(throttle, "bob", "10.0.0.3", ok=True)
    for _ in range(IN_FLIGHT_MAX["pair"]):  # a trusted pair: bounded on its own
        assert throttle.begin("bob", "10.0.0.3") is True
    with pytest.raises(TooManyRequestsError, match="at once for user 'bob'"):
        throttle.begin("bob", "10.0.0.3")
    for _ in range(IN_FLIGHT_MAX["pair"]):
        throttle.end("bob", "10.0.0.3", True, None)
    for _ in range(60):  # refused before checking: no failure counted
        with pytest.raises(TooManyRequestsError):
            throttle.begin("ann", "10.0.0.3")
    assert attempt(throttle, "carl", "10.0.0.3", ok=True)


def test_failures_behind_one_address_lock_out_only_their_names():
    """Everyone behind one proxy or NAT shares an address: 50 failures there, spread over names or
    at one name, block those names (and pairs), not a first login of someone else there."""
    clock = Clock()
    throttle = LoginThrottle(clock)
    for i in range(50):
        attempt(throttle, f"user{i % 10}", "10.0.0.1", ok=False)
        attempt(throttle, "mallory", "10.0.0.1", ok=False)
    with pytest.raises(TooManyRequestsError, match=r"for user 'mallory'"):
        throttle.begin("mallory", "10.0.0.1")
    assert attempt(throttle, "carol", "10.0.0.1", ok=True), "a first login behind the same address"
    assert attempt(throttle, "dave", "10.0.0.1", ok=False), "and a first failure there is checked"
    with pytest.raises(TooManyRequestsError, match=r"for user 'user3' from 10\.0\.0\.1"):
        throttle.begin("user3", "10.0.0.1")
