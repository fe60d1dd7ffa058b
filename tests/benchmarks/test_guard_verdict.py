"""The regression gate's statistics, order of runs and table (pure parts, no benchmark runs)."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.guard_scenarios import (
    DEFAULT_SCENARIOS,
    SCENARIOS,
    Scenario,
    missing_flags,
    parse_scenarios,
    schedule,
)
from benchmarks.guard_table import number, render
from benchmarks.guard_verdict import (
    CONFIDENCE,
    MIN_PAIRS,
    Figure,
    error,
    failed,
    judge,
    median_interval,
    pair_ratios,
    skipped,
)

P99 = Figure("latency", "latency_5000_100b_p99_ms", "latency 5,000/s 100 B p99", "ms", higher_is_better=False,
             tolerance=1.25)
PRODUCE = Figure("produce", "produce_100b_records_per_s", "produce 100 B", "records/s", higher_is_better=True,
                 tolerance=1.10)
ratios_strategy = st.lists(st.floats(min_value=0.01, max_value=100, allow_nan=False), min_size=1, max_size=40,
                           unique=True)


def coverage(n: int, k: int) -> float:
    """P(the k-th smallest <= median <= the k-th largest) for n draws of a continuous variable."""
    return 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2 ** n


def test_the_interval_of_five_pairs_is_min_to_max_and_fewer_give_none():
    assert median_interval([1.3, 0.9, 1.1, 1.0, 1.2]) == (0.9, 1.3)
    for n in range(1, MIN_PAIRS):
        assert median_interval([1.0] * n) is None
    assert median_interval(list(range(1, 11))) == (2, 9)      # n = 10: k = 2 (coverage 97.9 %)


@given(ratios_strategy)
def test_the_interval_holds_the_median_and_reaches_the_confidence(values):
    interval = median_interval(values)
    if len(values) < MIN_PAIRS:
        assert interval is None
        return
    assert interval is not None
    low, high = interval
    assert low <= statistics.median(values) <= high
    ordered = sorted(values)
    k = ordered.index(low) + 1
    assert coverage(len(values), k) >= CONFIDENCE - 1e-9
    # The next narrower interval would not reach it (the interval is the narrowest that does).
    assert k + 1 > len(values) // 2 or coverage(len(values), k + 1) < CONFIDENCE


def test_pairs_missing_a_side_are_dropped_and_a_zero_baseline_too():
    assert pair_ratios([2.0, None, 4.0, 0.0], [3.0, 1.0, None, 5.0]) == [1.5]
    with pytest.raises(ValueError, match="against"):
        pair_ratios([1.0], [1.0, 2.0])


def test_a_latency_five_times_worse_in_every_pair_fails():
    row = judge(P99, [3.1, 3.4, 2.9, 3.8, 3.2], [16.2, 15.0, 19.4, 14.1, 17.0])
    assert row.verdict == "worse"
    assert row.pairs == 5
    assert row.baseline == 3.2 and row.candidate == 16.2
    assert row.ratio is not None and 4 < row.ratio < 6
    assert failed([row])


def test_a_median_past_the_tolerance_does_not_fail_when_one_pair_went_the_other_way():
    # The candidate lost badly in four pairs and won in one: the interval crosses 1.
    row = judge(P99, [3.0, 3.0, 3.0, 3.0, 9.0], [6.0, 6.0, 6.0, 6.0, 4.0])
    assert row.verdict == "ok"
    assert not failed([row])


def test_a_loss_in_every_pair_within_the_tolerance_does_not_fail():
    row = judge(PRODUCE, [100.0] * 5, [95.0, 96.0, 94.0, 97.0, 95.0])
    assert row.verdict == "ok"


def test_throughput_is_worse_when_it_falls():
    assert judge(PRODUCE, [100.0] * 5, [80.0, 70.0, 85.0, 75.0, 60.0]).verdict == "worse"
    assert judge(PRODUCE, [100.0] * 5, [130.0, 140.0, 125.0, 150.0, 120.0]).verdict == "better"
    assert judge(P99, [10.0] * 5, [5.0, 6.0, 4.0, 7.0, 5.0]).verdict == "better"


def test_four_pairs_are_inconclusive_and_never_fail():
    row = judge(P99, [1.0] * 4, [10.0] * 4)
    assert row.verdict == "inconclusive"
    assert "5 pairs needed" in row.note
    assert not failed([row])
    assert judge(P99, [None] * 5, [1.0] * 5).verdict == "inconclusive"


@given(st.lists(st.floats(min_value=0.1, max_value=1e6, allow_nan=False), min_size=MIN_PAIRS, max_size=12))
def test_identical_sides_never_fail(values):
    for figure in (P99, PRODUCE):
        assert judge(figure, values, values).verdict == "ok"


def test_the_gate_fails_on_a_candidate_error_but_not_on_a_skipped_figure():
    assert failed([error(P99, "the candidate's run failed in pair 2")])
    assert not failed([skipped(P99, "the baseline has no `latency` benchmark")])


def test_a_tolerance_must_exceed_one():
    with pytest.raises(ValueError, match="tolerance"):
        judge(Figure("x", "x_ms", "x", "ms", higher_is_better=False, tolerance=1.0), [1.0], [1.0])


def test_repetitions_are_outermost_and_the_side_that_goes_first_alternates():
    steps = schedule(["produce", "latency"], 4)
    assert [(s.rep, s.scenario) for s in steps] == [(r, n) for r in range(4) for n in ("produce", "latency")]
    assert [s.sides for s in steps if s.scenario == "latency"] == [
        ("baseline", "candidate"), ("candidate", "baseline")] * 2
    with pytest.raises(ValueError, match="repeat"):
        schedule(["produce"], 0)


def test_scenarios_are_parsed_into_the_gate_order():
    assert parse_scenarios("all") == DEFAULT_SCENARIOS
    assert parse_scenarios("latency, produce") == ("produce", "latency")
    for bad in ("", "latency,nope", "all,produce"):
        with pytest.raises(ValueError, match="subset"):
            parse_scenarios(bad)
    assert set(DEFAULT_SCENARIOS) == {"produce", "consume", "latency", "replication", "spark"}


def test_every_latency_rate_has_its_p50_p99_and_p999_row():
    names = {f.name for f in SCENARIOS["latency"].figures}
    for rate in (1000, 5000, 20_000):
        assert {f"latency_{rate}_100b_{p}_ms" for p in ("p50", "p99", "p999")} <= names


def test_a_flag_counts_only_as_a_whole_word_of_the_help():
    scenario = Scenario("x", ("latency", "--quick", "--systems", "logbroker"), "latency.logbroker.json", ())
    full = "usage: python -m benchmarks latency [-h] [--quick] [--out OUT] [--systems SYSTEMS]"
    assert missing_flags(scenario, full) == []
    assert missing_flags(scenario, "usage: latency [--quick-ish] [--out OUT] [--systems-list X]") == [
        "--quick", "--systems"]


def test_the_table_shows_each_row_with_its_verdict_and_reason():
    rows = [judge(P99, [3.1, 3.4, 2.9, 3.8, 3.2], [16.2, 15.0, 19.4, 14.1, 17.0]),
            judge(PRODUCE, [200_000.0] * 5, [201_000.0, 199_000.0, 202_000.0, 198_000.0, 200_500.0]),
            skipped(PRODUCE, "baseline 5da49141f has no `replication` benchmark")]
    text = render(rows, ["baseline: c63d20c", "candidate: 5da4914"])
    lines = text.splitlines()
    assert lines[:2] == ["baseline: c63d20c", "candidate: 5da4914"]
    head = lines[2]
    assert head.split()[:3] == ["figure", "better", "baseline"]
    p99 = next(line for line in lines if line.startswith("latency 5,000/s 100 B p99 (ms)"))
    assert p99.split()[-1] == "WORSE"
    assert " 3.20 " in p99 and " 16.2 " in p99 and " 0.21-0.19 " not in p99
    produce = next(line for line in lines if line.startswith("produce 100 B (records/s)"))
    assert "200,000" in produce and produce.rstrip().endswith("ok")
    assert lines[5].endswith("skipped: baseline 5da49141f has no `replication` benchmark")
    # The verdict column starts at the same place on every line.
    assert len({line.index(word) for line, word in zip(lines[2:6], ("verdict", "WORSE", "ok", "skipped"),
                                                        strict=True)}) == 1


def test_numbers_are_shown_to_their_precision():
    assert number(212_345.6, "records/s") == "212,346"
    assert number(3.104, "ms") == "3.10"
    assert number(16.21, "ms") == "16.2"
    assert number(0.1754, "ms") == "0.175"
    assert number(None, "ms") == "-"
