"""Token buckets with debt and the per-user connection count (pure, injected time)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.auth.quotas import ConnectionCounter, QuotaLimits, Quotas, TokenBucket


def test_bucket_admits_until_in_debt_then_reports_the_wait():
    bucket = TokenBucket(1000, now=0.0)
    assert bucket.delay_s(0.0) == 0
    bucket.charge(3000, 0.0)
    assert bucket.delay_s(0.0) == 2.0
    assert bucket.delay_s(1.5) == 0.5
    assert bucket.delay_s(2.0) == 0
    assert bucket.delay_s(100.0) == 0 and bucket.tokens == bucket.burst, "refill stops at the burst"


@given(st.lists(st.tuples(st.floats(0, 5), st.integers(0, 50_000)), max_size=60))
def test_admitted_bytes_never_exceed_rate_times_time_plus_burst_plus_one_request(steps):
    rate = 10_000
    bucket, now, admitted, largest = TokenBucket(rate, now=0.0), 0.0, 0, 0
    for advance, size in steps:
        now += advance
        if bucket.delay_s(now) == 0:
            bucket.charge(size, now)
            admitted += size
            largest = max(largest, size)
    assert admitted <= rate * now + bucket.burst + largest


@given(st.integers(1, 10**7), st.floats(0, 10**8),
       st.lists(st.tuples(st.floats(0, 5), st.integers(1, 10**6)), min_size=1, max_size=30))
def test_waiting_the_named_delay_repays_the_debt(rate, start, steps):
    """A caller that waits exactly the delay it was told is let in (a Kafka Fetch repays its debt,
    then reads), whatever the monotonic clock reads (a host up for years) and the rate."""
    bucket, now = TokenBucket(rate, now=start), start
    for advance, size in steps:
        now += advance
        bucket.charge(size, now)
        delay = bucket.delay_s(now)
        if delay > 0:
            now += delay
            assert bucket.delay_s(now) == 0, (delay, bucket.tokens)


def test_quotas_per_user_and_kind_and_unlimited():
    now = [0.0]
    quotas = Quotas(lambda: now[0])
    limits = QuotaLimits(produce_bytes_per_s=100)
    quotas.charge("a", "produce", limits, 250)
    assert quotas.delay_s("a", "produce", limits) == 1.5
    assert quotas.delay_s("b", "produce", limits) == 0, "users have buckets of their own"
    assert quotas.delay_s("a", "fetch", limits) == 0, "fetch is unlimited here"
    raised = limits.override({"produce_bytes_per_s": 1000})
    assert quotas.delay_s("a", "produce", raised) == 0, "a new limit starts a new bucket"


class Conn:
    def __init__(self) -> None:
        self.transport = self

    def is_closing(self) -> bool:
        return False


def test_connection_counter_releases_closed_connections():
    counter = ConnectionCounter()
    a, b, c = Conn(), Conn(), Conn()
    assert counter.admit("u", a, 2) and counter.admit("u", a, 2) and counter.admit("u", b, 2)
    assert not counter.admit("u", c, 2)
    assert counter.admit("v", c, 2), "limits are per user"
    a.transport = None
    assert counter.admit("u", c, 2), "a closed connection no longer counts"
    assert counter.admit("u", Conn(), 0), "0 means unlimited"
