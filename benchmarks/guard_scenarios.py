"""What the regression gate runs on each side, what it reads back, and in which order (pure).

Every scenario is a quick run of an existing benchmark command, started in the side's own tree
(``PYTHONPATH=<tree> python -m benchmarks <command> --quick ... --out DIR``), so each side is
measured by the harness it had; the gate reads the result file that run wrote. A tree whose
command lacks a flag the gate passes cannot run that scenario: the gate skips it and says why.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Final, Literal

from benchmarks.guard_verdict import Figure

Side = Literal["baseline", "candidate"]
SIDES: Final[tuple[Side, Side]] = ("baseline", "candidate")
THROUGHPUT_TOLERANCE: Final = 1.10
LATENCY_TOLERANCE: Final = 1.25
LATENCY_TAIL_TOLERANCE: Final = 1.50     # p99.9: in a quick run, one of the few slowest records
LATENCY_RATES: Final = (1000, 5000, 20_000)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    argv: tuple[str, ...]           # after ``python -m benchmarks``; the gate adds ``--out DIR``
    result_file: str                # what the run writes into DIR
    figures: tuple[Figure, ...]
    needs_jar: bool = False         # the JVM segment reader, built in the side's own tree
    timeout_s: float = 900.0        # one run of one side

    @property
    def flags(self) -> tuple[str, ...]:
        """The options the side's command must accept."""
        return (*(a for a in self.argv if a.startswith("--")), "--out")


def _throughput(scenario: str, name: str, label: str) -> Figure:
    return Figure(scenario, name, label, "records/s", higher_is_better=True, tolerance=THROUGHPUT_TOLERANCE)


def _latency_figures() -> tuple[Figure, ...]:
    figures = []
    for rate in LATENCY_RATES:
        for key, shown, tolerance in (("p50", "p50", LATENCY_TOLERANCE), ("p99", "p99", LATENCY_TOLERANCE),
                                      ("p999", "p99.9", LATENCY_TAIL_TOLERANCE)):
            figures.append(Figure("latency", f"latency_{rate}_100b_{key}_ms", f"latency {rate:,}/s 100 B {shown}",
                                  "ms", higher_is_better=False, tolerance=tolerance))
    return tuple(figures)


LOGBROKER: Final = ("--systems", "logbroker")
SCENARIOS: Final = {s.name: s for s in (
    Scenario("produce", ("produce", "--quick", *LOGBROKER), "produce.logbroker.json", (
        _throughput("produce", "produce_100b_records_per_s", "produce 100 B"),
        _throughput("produce", "produce_1024b_records_per_s", "produce 1 KiB"))),
    Scenario("consume", ("consume", "--quick", *LOGBROKER), "consume.logbroker.json", (
        _throughput("consume", "consume_100b_records_per_s", "consume 100 B"),
        _throughput("consume", "consume_1024b_records_per_s", "consume 1 KiB"))),
    Scenario("latency", ("latency", "--quick", *LOGBROKER), "latency.logbroker.json", _latency_figures()),
    Scenario("replication", ("replication", "--quick", *LOGBROKER), "replication.logbroker.json", (
        _throughput("replication", "produce_r3_records_per_s", "produce RF 3 acks=all"),
        Figure("replication", "produce_r3_over_single_throughput_ratio", "produce RF 3 / lone node", "ratio",
               higher_is_better=True, tolerance=THROUGHPUT_TOLERANCE))),
    Scenario("spark", ("spark", "--quick"), "spark.json", (
        _throughput("spark", "jvm_direct_records_per_s", "Spark direct read (JVM reader)"),
        _throughput("spark", "direct_records_per_s", "Spark direct read (Python reader)")),
        needs_jar=True, timeout_s=1800.0),
)}
DEFAULT_SCENARIOS: Final = tuple(SCENARIOS)


def parse_scenarios(text: str) -> tuple[str, ...]:
    """``produce,latency`` (or ``all``) as scenario names in the gate's order; unknown names raise."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return DEFAULT_SCENARIOS
    unknown = [n for n in names if n not in SCENARIOS]
    if not names or unknown:
        raise ValueError(f"scenarios must be 'all' or a comma-separated subset of {','.join(SCENARIOS)}")
    return tuple(n for n in SCENARIOS if n in names)


@dataclasses.dataclass(frozen=True)
class Step:
    rep: int                        # 0-based repetition (= pair) number
    scenario: str
    sides: tuple[Side, Side]        # the order the two runs of this pair go in


def schedule(scenarios: Sequence[str], repeat: int) -> list[Step]:
    """Every pair of runs in the order they happen: repetitions outermost, so each repetition
    passes through every scenario before the next begins; within a pair the two sides back to
    back, the side that goes first alternating from one repetition to the next (a side that
    always ran second would always meet a warm page cache or a machine that just got busier)."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    steps: list[Step] = []
    for rep in range(repeat):
        order: tuple[Side, Side] = SIDES if rep % 2 == 0 else (SIDES[1], SIDES[0])
        steps.extend(Step(rep, scenario, order) for scenario in scenarios)
    return steps


def missing_flags(scenario: Scenario, help_text: str) -> list[str]:
    """The flags of ``scenario`` that the side's ``<command> --help`` output does not list."""
    return [flag for flag in scenario.flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text)]
