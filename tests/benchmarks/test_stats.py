"""The harness's statistics: nearest-rank percentiles, summaries, units and rate pacing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.stats import (
    due_count,
    latency_figures,
    percentile,
    percentiles,
    summarize_samples,
    unit_of,
)

samples = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=300)
ranks = st.floats(min_value=1e-6, max_value=1.0)


def test_nearest_rank_on_known_values():
    values = list(range(1, 101))          # 1..100
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 0.999) == 100
    assert percentile(values, 1.0) == 100
    assert percentile(values, 0.001) == 1
    assert percentiles([5.0, 1.0, 3.0], (0.5, 1.0)) == [3.0, 5.0]
    assert percentile(list(range(1, 1001)), 0.999) == 999


@given(samples, ranks)
def test_a_percentile_is_an_observed_sample_with_enough_below_it(values, q):
    p = percentile(values, q)
    assert p in values
    at_or_below = sum(v <= p for v in values)
    assert at_or_below >= math.ceil(q * len(values) - 1e-9)
    assert sum(v < p for v in values) < max(1, math.ceil(q * len(values) - 1e-9))


@given(samples, ranks, ranks)
def test_percentiles_grow_with_the_rank(values, q1, q2):
    low, high = sorted((q1, q2))
    assert percentile(values, low) <= percentile(values, high)
    assert percentile(values, 1.0) == max(values)


@pytest.mark.parametrize("q", [0.0, -0.5, 1.5, float("nan")])
def test_bad_rank_is_refused(q):
    with pytest.raises(ValueError, match="rank"):
        percentile([1.0, 2.0], q)


def test_no_samples_is_refused():
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)


@given(samples)
def test_latency_figures_are_ordered(values):
    figures = latency_figures("latency_5000_100b", values)
    ordered = [figures[f"latency_5000_100b_{n}_ms"] for n in ("p50", "p90", "p99", "p999", "max")]
    assert ordered == sorted(ordered)
    assert ordered[-1] == max(values)


def test_summaries_are_median_min_max():
    figures = summarize_samples({"produce_100b_records_per_s": [3.0, 1.0, 2.0, 10.0]})
    assert figures == {"produce_100b_records_per_s": 2.5, "produce_100b_records_per_s_min": 1.0,
                       "produce_100b_records_per_s_max": 10.0}
    with pytest.raises(ValueError, match="no samples"):
        summarize_samples({"x_ms": []})


@pytest.mark.parametrize(("name", "unit"), [
    ("produce_100b_records_per_s", "records/s"), ("consume_1024b_mb_per_s", "MB/s"),
    ("latency_5000_100b_p99_ms", "ms"), ("latency_5000_100b_p99_ms_min", "ms"),
    ("idle_server_cpu_pct", "% of one core"), ("idle_server_rss_growth_mb", "MB"), ("idle_connect_s", "s"),
    ("idle_slowdown_100b_ratio", "ratio"), ("idle_server_rss_per_consumer_kb", "KB"),
    ("idle_server_rss_per_consumer_kb_max", "KB"),
])
def test_units_follow_from_names(name, unit):
    assert unit_of(name) == unit


def test_a_name_without_a_unit_is_refused():
    with pytest.raises(ValueError, match="unit"):
        unit_of("produce_100b_speed")


def test_pacing_sends_one_at_once_then_the_rate():
    assert due_count(0.0, 5000, 100) == 1
    assert due_count(-1.0, 5000, 100) == 0
    assert due_count(0.001, 5000, 100) == 6
    assert due_count(10.0, 5000, 100) == 100


@given(st.floats(min_value=0, max_value=100), st.floats(min_value=0, max_value=100),
       st.integers(min_value=1, max_value=100_000), st.integers(min_value=0, max_value=10**6))
def test_pacing_never_goes_back_and_never_passes_the_total(t1, t2, rate, total):
    early, late = sorted((t1, t2))
    assert 0 <= due_count(early, rate, total) <= due_count(late, rate, total) <= total


@pytest.mark.parametrize(("rate", "total"), [(0, 10), (-1, 10), (10, -1)])
def test_pacing_refuses_bad_arguments(rate, total):
    with pytest.raises(ValueError):
        due_count(1.0, rate, total)
