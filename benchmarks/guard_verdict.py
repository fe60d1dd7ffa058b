"""The regression gate's statistics (decision 0255): per-pair ratios, an interval for their median,
and a verdict per figure. Pure: no I/O, no clock.

Each repetition runs the baseline and the candidate back to back (a pair), so a burst of load from
elsewhere on the machine falls on both sides of one pair rather than on a whole block of one side.
A figure's evidence is therefore its per-pair ratios ``candidate / baseline``, one per pair, not
two pooled samples: pairing cancels the drift that dominates a shared machine.

The interval is the distribution-free one for a median (the sign test's): the k-th smallest and
k-th largest ratio, k the largest with ``P(Binomial(n, 1/2) < k) <= (1 - CONFIDENCE) / 2``. With
5 pairs that is min to max, covering the true median with probability 1 - 2/32 = 93.75 %; fewer
than 5 pairs cannot reach 90 %, so such a figure is ``inconclusive`` and never fails.

A figure is ``worse`` (the gate fails) when both hold: its median ratio is worse than the
figure's tolerance (10 % for throughput, 25 % for p50 and p99, 50 % for p99.9, which in a quick
run is one of the few slowest records), and the whole interval lies on the worse side of 1 (the
candidate lost in about every pair, not only on average). ``better`` is the mirror image; anything
else is ``ok`` (within what this run could tell apart).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Final, Literal

CONFIDENCE: Final = 0.90        # two-sided, for the interval of the median ratio
MIN_PAIRS: Final = 5            # the fewest pairs whose min-max interval reaches CONFIDENCE

Verdict = Literal["worse", "better", "ok", "inconclusive", "skipped", "error"]


@dataclasses.dataclass(frozen=True)
class Figure:
    """One row of the gate: a figure of a scenario's result file."""

    scenario: str
    name: str                   # its key in the result file's "figures"
    label: str                  # how the table names it
    unit: str
    higher_is_better: bool
    tolerance: float            # > 1: the factor by which the median may be worse before it fails


@dataclasses.dataclass(frozen=True)
class Row:
    """A figure's summary over the pairs, and what the gate makes of it."""

    figure: Figure
    verdict: Verdict
    pairs: int = 0
    baseline: float | None = None          # median of the baseline's runs
    candidate: float | None = None         # median of the candidate's runs
    ratio: float | None = None             # median of the per-pair ratios candidate / baseline
    ratio_min: float | None = None
    ratio_max: float | None = None
    interval: tuple[float, float] | None = None
    note: str = ""


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The order-statistic interval that covers the median of what ``values`` were drawn from
    with at least ``confidence``; None when there are too few values to reach it."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    n = len(values)
    tail = (1.0 - confidence) / 2.0
    k = 0
    below = 0.0                          # P(Binomial(n, 1/2) <= k - 1), growing with k
    while k < n:
        below += math.comb(n, k) / 2.0 ** n
        if below > tail + 1e-12:
            break
        k += 1
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def pair_ratios(baseline: Sequence[float | None], candidate: Sequence[float | None]) -> list[float]:
    """``candidate / baseline`` for each pair where both sides measured the figure (a run that
    failed, or a zero baseline, drops that pair only)."""
    if len(baseline) != len(candidate):
        raise ValueError(f"{len(baseline)} baseline runs against {len(candidate)} candidate runs")
    return [c / b for b, c in zip(baseline, candidate, strict=True) if b is not None and c is not None and b > 0]


def judge(figure: Figure, baseline: Sequence[float | None], candidate: Sequence[float | None]) -> Row:
    """The row for ``figure`` from its per-pair values (None: that side's run gave no value)."""
    if figure.tolerance <= 1.0:
        raise ValueError(f"{figure.name}: tolerance must exceed 1, got {figure.tolerance!r}")
    ratios = pair_ratios(baseline, candidate)
    base = [b for b in baseline if b is not None]
    cand = [c for c in candidate if c is not None]
    row = Row(figure, "inconclusive", pairs=len(ratios), baseline=statistics.median(base) if base else None,
              candidate=statistics.median(cand) if cand else None)
    if not ratios:
        return dataclasses.replace(row, note="no pair measured both sides")
    interval = median_interval(ratios)
    row = dataclasses.replace(row, ratio=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios),
                              interval=interval)
    if interval is None:
        return dataclasses.replace(row, note=f"{len(ratios)} of {MIN_PAIRS} pairs needed for a verdict")
    assert row.ratio is not None
    low, high = interval
    # Put "worse" on one side: slowdown > 1 means the candidate did worse.
    slowdown, slow_low, slow_high = ((1 / row.ratio, 1 / high, 1 / low) if figure.higher_is_better
                                     else (row.ratio, low, high))
    if slowdown > figure.tolerance and slow_low > 1.0:
        verdict: Verdict = "worse"
    elif slowdown < 1 / figure.tolerance and slow_high < 1.0:
        verdict = "better"
    else:
        verdict = "ok"
    return dataclasses.replace(row, verdict=verdict)


def skipped(figure: Figure, reason: str) -> Row:
    """A figure one side cannot measure (an older tree without the scenario): said, never hidden."""
    return Row(figure, "skipped", note=reason)


def error(figure: Figure, reason: str) -> Row:
    """A figure the candidate failed to measure where the baseline did: the gate fails."""
    return Row(figure, "error", note=reason)


def failed(rows: Sequence[Row]) -> bool:
    """The gate fails on a figure measured worse, or on a candidate that could not run what its
    baseline ran (an ``error`` row)."""
    return any(row.verdict in ("worse", "error") for row in rows)
