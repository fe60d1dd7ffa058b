"""The regression gate's table (pure): one line per figure, the medians of both sides, the median
of the per-pair ratios with its min-max and interval, and the verdict with its reason."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.guard_verdict import CONFIDENCE, Row

HEADER = ("figure", "better", "baseline", "candidate", "ratio", "min-max", "interval", "pairs", "verdict")
VERDICT_SHOWN = {"worse": "WORSE", "better": "better", "ok": "ok", "inconclusive": "inconclusive",
                 "skipped": "skipped", "error": "ERROR"}


def number(value: float | None, unit: str) -> str:
    """A figure as the table shows it: records/s whole, ms and ratios to three significant digits."""
    if value is None:
        return "-"
    if unit == "records/s":
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def cells(row: Row) -> tuple[str, ...]:
    figure = row.figure
    interval = "-" if row.interval is None else f"{row.interval[0]:.2f}-{row.interval[1]:.2f}"
    spread = "-" if row.ratio_min is None else f"{_ratio(row.ratio_min)}-{_ratio(row.ratio_max)}"
    verdict = VERDICT_SHOWN[row.verdict] + (f": {row.note}" if row.note else "")
    return (f"{figure.label} ({figure.unit})", "higher" if figure.higher_is_better else "lower",
            number(row.baseline, figure.unit), number(row.candidate, figure.unit), _ratio(row.ratio), spread,
            interval, str(row.pairs) if row.pairs else "-", verdict)


def render(rows: Sequence[Row], title: Sequence[str] = ()) -> str:
    """The table as text: ``title`` lines, the column heads, one line per row, and a legend."""
    lines = [list(HEADER), *(list(cells(row)) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER) - 1)]
    right = {2, 3, 4, 5, 6, 7}
    out = list(title)
    for line in lines:
        out.append("  ".join([*(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                                for i, cell in enumerate(line[:-1])), line[-1]]).rstrip())
    out.append(f"ratio: candidate / baseline, median of the per-pair ratios; interval: >= {CONFIDENCE:.0%} for that "
               "median (order statistics); WORSE: past the figure's tolerance with the whole interval on the worse "
               "side of 1.")
    return "\n".join(out)
