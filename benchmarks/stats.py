"""Pure statistics for the harness: nearest-rank percentiles, median/min/max summaries, rate pacing.

Percentiles use the nearest-rank definition (the smallest sample with at least ``q`` of the
samples at or below it), so a reported p99 is always a latency that was really observed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

# The latency percentiles every system's samples are reduced to, and the figure suffix of each.
LATENCY_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` for ``q`` in (0, 1]."""
    return percentiles(values, (q,))[0]


def percentiles(values: Sequence[float], qs: Iterable[float]) -> list[float]:
    """Nearest-rank percentiles, sorting ``values`` once."""
    if not values:
        raise ValueError("percentile of no samples")
    ordered = sorted(values)
    out = []
    for q in qs:
        if not 0.0 < q <= 1.0 or math.isnan(q):
            raise ValueError(f"percentile rank must be in (0, 1], got {q!r}")
        rank = max(1, math.ceil(q * len(ordered) - 1e-9))
        out.append(ordered[rank - 1])
    return out


def latency_figures(prefix: str, latencies_ms: Sequence[float]) -> dict[str, float]:
    """``{prefix}_p50_ms`` ... ``{prefix}_max_ms`` of one repetition's samples."""
    values = percentiles(latencies_ms, (q for _, q in LATENCY_PERCENTILES))
    return {f"{prefix}_{name}_ms": value for (name, _), value in zip(LATENCY_PERCENTILES, values, strict=True)}


def summarize_samples(samples: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Per figure: the median of the repetitions as ``name``, and ``name_min``/``name_max``."""
    figures: dict[str, float] = {}
    for name, values in samples.items():
        if not values:
            raise ValueError(f"no samples for {name}")
        figures[name] = statistics.median(values)
        figures[f"{name}_min"] = min(values)
        figures[f"{name}_max"] = max(values)
    return figures


def unit_of(name: str) -> str:
    """The unit a figure's name implies (names end in their unit, STYLE §8.15)."""
    base = name.removesuffix("_min").removesuffix("_max")
    for suffix, unit in (("_records_per_s", "records/s"), ("_mb_per_s", "MB/s"), ("_ms", "ms"),
                         ("_cpu_pct", "% of one core"), ("_mb", "MB"), ("_kb", "KB"), ("_s", "s"), ("_ratio", "ratio"),
                         ("_count", "count")):
        if base.endswith(suffix):
            return unit
    raise ValueError(f"figure name {name!r} does not end in a known unit")


def due_count(elapsed_s: float, rate_per_s: float, total: int) -> int:
    """How many messages a paced sender should have sent ``elapsed_s`` after it started: one at
    the start, then ``rate_per_s`` per second, never more than ``total``."""
    if rate_per_s <= 0 or total < 0:
        raise ValueError(f"rate must be positive and total non-negative, got {rate_per_s!r}, {total!r}")
    if elapsed_s < 0:
        return 0
    return min(total, int(elapsed_s * rate_per_s) + 1)
