"""REPORT.md from one run's result documents: every figure of every system side by side, and
LogBroker's ratio to each peer (LogBroker ÷ peer, medians of the same run). LogBroker may run as
two systems (``SUBJECTS``): over HTTP with its own client, and through its Kafka listener with
librdkafka; each gets its own column and its own ratios to the peers, and its own targets.

Pure: documents in, Markdown out. A ratio is only ever computed between two documents of the
same run: callers pass, for each scenario, the documents of one run (``results.read_latest``
selects each scenario's latest run by ``run_id``); the header lists the runs and their scenarios.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

SUBJECT: Final = "logbroker"
SUBJECTS: Final = (SUBJECT, "logbroker-kafka")   # LogBroker's own systems, compared with the peers
HIGHER_IS_BETTER: Final = frozenset({"records/s", "MB/s"})
SCENARIO_ORDER: Final = ("produce", "consume", "latency", "idle", "queue", "replication")


@dataclasses.dataclass(frozen=True)
class Cell:
    median: float
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class Row:
    scenario: str
    figure: str
    unit: str
    values: dict[str, Cell | None]       # system -> figure (None: the system has no such figure)
    ratios: dict[tuple[str, str], float | None]  # (subject, peer) -> subject ÷ peer (None: one side is missing)

    @property
    def higher_is_better(self) -> bool:
        return self.unit in HIGHER_IS_BETTER


@dataclasses.dataclass(frozen=True)
class Target:
    """One of the goals: a figure of one of LogBroker's systems against the best peer's, or
    against one named peer's."""

    label: str
    figure: str
    ratio_needed: float
    higher_is_better: bool       # True: met when ratio >= ratio_needed; False: when ratio <= it
    ratio: float | None
    peer: str | None             # the peer compared with (None: not measured)
    subject: str = SUBJECT
    best: bool = True            # the peer is the best of the run (else the goal names it)

    @property
    def met(self) -> bool | None:
        if self.ratio is None:
            return None
        return self.ratio >= self.ratio_needed if self.higher_is_better else self.ratio <= self.ratio_needed

    @property
    def needed(self) -> str:
        return f"{'≥' if self.higher_is_better else '≤'} {self.ratio_needed:g}×"


# (label, scenario, figure, ratio needed, higher is better, subject, peer: None for the best peer)
TARGETS: Final = (
    ("produce 100 B, records/s", "produce", "produce_100b_records_per_s", 2.0, True, SUBJECT, None),
    ("consume 100 B, records/s", "consume", "consume_100b_records_per_s", 2.0, True, SUBJECT, None),
    ("p50 at 5,000 records/s, 100 B", "latency", "latency_5000_100b_p50_ms", 1.5, False, SUBJECT, None),
    ("p99 at 5,000 records/s, 100 B", "latency", "latency_5000_100b_p99_ms", 1.0, False, SUBJECT, None),
    ("p99 at 5,000 records/s, 1 KiB", "latency", "latency_5000_1024b_p99_ms", 1.0, False, SUBJECT, None),
    ("Kafka listener: produce 100 B, records/s", "produce", "produce_100b_records_per_s", 2.0, True,
     "logbroker-kafka", "rabbitmq"),
    ("Kafka listener: consume 100 B, records/s", "consume", "consume_100b_records_per_s", 2.0, True,
     "logbroker-kafka", "rabbitmq"),
    ("Kafka listener: p99 at 5,000 records/s, 100 B", "latency", "latency_5000_100b_p99_ms", 1.0, False,
     "logbroker-kafka", "nats"),
)


# The figures of the short table at the top of REPORT.md (and of docs/performance.md): (label, scenario, figure);
# ``{param}`` in a label is filled from that scenario's parameters.
SUMMARY: Final = (
    ("produce 100 B, records/s", "produce", "produce_100b_records_per_s"),
    ("produce 1 KiB, records/s", "produce", "produce_1024b_records_per_s"),
    ("produce 100 B fsync'd (flush=always, acks=all), records/s", "produce", "produce_fsync_100b_records_per_s"),
    ("consume 100 B, records/s", "consume", "consume_100b_records_per_s"),
    ("consume 1 KiB, records/s", "consume", "consume_1024b_records_per_s"),
    ("latency at 1,000/s, 100 B, p50 / p99 / p99.9 ms", "latency", "latency_1000_100b"),
    ("latency at 5,000/s, 100 B, p50 / p99 / p99.9 ms", "latency", "latency_5000_100b"),
    ("latency at 5,000/s, 1 KiB, p50 / p99 / p99.9 ms", "latency", "latency_5000_1024b"),
    ("latency at 20,000/s, 100 B, p50 / p99 / p99.9 ms", "latency", "latency_20000_100b"),
    ("one publish at a time, 100 B (logbroker: JSON produce; logbroker-kafka: produce, flush), p50 / p99 / p99.9 ms",
     "latency", "publish_100b"),
    ("produce 100 B with {idle_consumers} idle consumers, records/s", "idle", "idle_produce_100b_records_per_s"),
    ("server memory per idle consumer ({idle_memory_consumers} waiting, fresh server), KB", "idle",
     "idle_server_rss_per_consumer_kb"),
    ("queue receive+ack 100 B, records/s", "queue", "queue_receive_ack_100b_records_per_s"),
    ("produce 100 B on 3 nodes, 3 replicas (LogBroker acks=all), records/s", "replication",
     "produce_r3_records_per_s"),
    ("produce 100 B, 3 replicas (acks=all) ÷ one lone node (acks=1)", "replication",
     "produce_r3_over_single_throughput_ratio"),
)


def summary(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """A short Markdown table: medians only, LogBroker's ratio to each peer in brackets (each of
    LogBroker's systems named when more than one ran)."""
    systems = systems_of(documents)
    subjects, _peers = split(systems)
    grouped = by_scenario(documents)
    lines = ["| what | " + " | ".join(systems) + " |", "|" + " --- |" * (len(systems) + 1)]
    for text, scenario, figure in SUMMARY:
        docs = grouped.get(scenario, {})
        names = [f"{figure}_{p}_ms" for p in ("p50", "p99", "p999")] if scenario == "latency" else [figure]
        first = next(iter(docs.values()), None)
        text = _label(text, first["params"] if first is not None else {})
        cells = []
        for system in systems:
            d = docs.get(system)
            if d is None or any(n not in d["figures"] for n in names):
                cells.append(_status(d) or "—")
                continue
            cell = " / ".join(fmt(d["figures"][n]) for n in names)
            if system not in SUBJECTS:
                cell += _summary_ratios(docs, d, names, subjects)
            cells.append(cell)
        if any(c not in ("—", "not run") for c in cells):
            lines.append(f"| {text} | " + " | ".join(cells) + " |")
    return lines


def _summary_ratios(docs: Mapping[str, Mapping[str, Any]], peer: Mapping[str, Any], names: Sequence[str],
                    subjects: Sequence[str]) -> str:
    """`` (a× / b×)``: each of LogBroker's systems that has the figures ÷ ``peer``."""
    parts = []
    for subject in subjects:
        d = docs.get(subject)
        if d is None or any(n not in d["figures"] for n in names):
            continue
        text = " / ".join(f"{d['figures'][n] / peer['figures'][n]:.2f}×" if peer["figures"][n] else "—"
                          for n in names)
        parts.append(text if len(subjects) == 1 else f"{subject} {text}")
    return f" ({'; '.join(parts)})" if parts else ""


def _label(text: str, params: Mapping[str, Any]) -> str:
    """``text`` with each ``{name}`` replaced by that parameter (integers with separators)."""
    def value(match: re.Match[str]) -> str:
        v = params.get(match[1], "?")
        return f"{v:,}" if isinstance(v, int) else str(v)

    return re.sub(r"\{(\w+)\}", value, text)


def systems_of(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """LogBroker's systems first, then the peers in name order."""
    names = {str(d["system"]) for d in documents}
    return [s for s in SUBJECTS if s in names] + sorted(names - set(SUBJECTS))


def split(systems: Sequence[str]) -> tuple[list[str], list[str]]:
    """``systems`` as (LogBroker's, the peers), each in the order given."""
    return [s for s in systems if s in SUBJECTS], [s for s in systems if s not in SUBJECTS]


def by_scenario(documents: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Mapping[str, Any]]]:
    out: dict[str, dict[str, Mapping[str, Any]]] = {}
    for d in documents:
        scenario, system = str(d["scenario"]), str(d["system"])
        if system in out.setdefault(scenario, {}):
            raise ValueError(f"two documents for {scenario}/{system} in one run")
        out[scenario][system] = d
    order = {name: i for i, name in enumerate(SCENARIO_ORDER)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def ratio_rows(documents: Sequence[Mapping[str, Any]]) -> list[Row]:
    """One row per (scenario, figure median), in the order the figures first appear."""
    systems = systems_of(documents)
    subjects, peers = split(systems)
    rows = []
    for scenario, docs in by_scenario(documents).items():
        names: dict[str, str] = {}
        for system in systems:
            d = docs.get(system)
            for name, unit in (d["unit"].items() if d else ()):
                if not name.endswith(("_min", "_max")):
                    names.setdefault(name, unit)
        for name, unit in names.items():
            values = {s: _cell(docs.get(s), name) for s in systems}
            ratios = {(s, p): _ratio(values[s], values[p]) for s in subjects for p in peers}
            rows.append(Row(scenario, name, unit, values, ratios))
    return rows


def _cell(document: Mapping[str, Any] | None, name: str) -> Cell | None:
    if document is None or name not in document["figures"]:
        return None
    figures = document["figures"]
    median = float(figures[name])
    return Cell(median, float(figures.get(f"{name}_min", median)), float(figures.get(f"{name}_max", median)))


def _ratio(subject: Cell | None, peer: Cell | None) -> float | None:
    if subject is None or peer is None or peer.median == 0:
        return None
    return subject.median / peer.median


def targets(documents: Sequence[Mapping[str, Any]]) -> list[Target]:
    """The goals of each of LogBroker's systems in this run, against the peer each goal names or
    else the best peer of this run (highest throughput, lowest latency)."""
    rows = {(r.scenario, r.figure): r for r in ratio_rows(documents)}
    ran = set(systems_of(documents))
    out = []
    for label, scenario, figure, needed, higher, subject, named in TARGETS:
        if subject not in ran:
            continue
        row = rows.get((scenario, figure))
        peers = {} if row is None or row.values.get(subject) is None else \
            {p: c for p, c in row.values.items() if p not in SUBJECTS and c is not None and named in (None, p)}
        if row is None or not peers:
            out.append(Target(label, figure, needed, higher, None, None, subject, named is None))
            continue
        pick = max if higher else min
        peer = pick(peers, key=lambda p: peers[p].median)
        out.append(Target(label, figure, needed, higher, row.ratios[(subject, peer)], peer, subject, named is None))
    return out


def fmt(value: float) -> str:
    """Numbers as a reader wants them: thousands separators, three significant digits below 100."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _fmt_cell(cell: Cell | None, status: str | None) -> str:
    if cell is None:
        return status or "—"
    if cell.low == cell.high == cell.median:
        return fmt(cell.median)
    return f"{fmt(cell.median)} ({fmt(cell.low)}–{fmt(cell.high)})"


def _fmt_ratio(row: Row, subject: str, peer: str) -> str:
    ratio = row.ratios.get((subject, peer))
    if ratio is None:
        return "—"
    ahead = ratio > 1 if row.higher_is_better else ratio < 1
    return f"{ratio:.2f}×" + (" ✓" if ahead else "")


def render(documents: Sequence[Mapping[str, Any]], *, plots: Sequence[tuple[str, str]] = (),
           command: str = "make bench", notes: Sequence[str] = ()) -> str:
    """The Markdown report of one run. ``plots``: (title, relative path) pairs."""
    if not documents:
        raise ValueError("no result documents to report on")
    systems = systems_of(documents)
    grouped = by_scenario(documents)
    lines = [
        "# Benchmark report: LogBroker and its peers, side by side",
        "",
        *_runs_section(documents, grouped, command),
        "",
        "Every figure is the median of the repetitions, with min–max in brackets. Ratios are "
        "**LogBroker ÷ peer**, computed from medians of this same run; ✓ marks a ratio where LogBroker "
        "is ahead (higher for records/s and MB/s, lower for everything else). Client and server share "
        "the machine's cores for every system alike.",
        "",
        "| system | version |",
        "| --- | --- |",
    ]
    versions = {str(d["system"]): str(d["version"]) for d in documents}
    lines += [f"| {s} | {versions[s]} |" for s in systems]
    if len(split(systems)[0]) > 1:
        lines += ["", "LogBroker runs twice: `logbroker` over HTTP with its own client, `logbroker-kafka` the same "
                  "node's Kafka listener with librdkafka; each has its own ratios to the peers."]
    lines += ["", "## Summary", "", "Medians; in brackets LogBroker ÷ that peer.", "", *summary(documents), "",
              *_targets_section(documents)]
    rows = ratio_rows(documents)
    for scenario, docs in grouped.items():
        lines += _scenario_section(scenario, docs, [r for r in rows if r.scenario == scenario], systems)
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{title}]({path})" for title, path in plots]
        lines.append("")
    if notes:
        lines += ["## Notes", "", *notes, ""]
    return "\n".join(lines).rstrip() + "\n"


def _runs_section(documents: Sequence[Mapping[str, Any]], grouped: Mapping[str, Mapping[str, Mapping[str, Any]]],
                  command: str) -> list[str]:
    """Which run each scenario's figures come from, and how to reproduce it (``command`` for a
    run whose documents do not record theirs)."""
    machine = documents[0]["machine"]
    runs: dict[str, list[Mapping[str, Any]]] = {}
    for d in documents:
        runs.setdefault(str(d["params"].get("run_id", "?")), []).append(d)

    def describe(run_id: str) -> tuple[str, str, list[str]]:
        docs = runs[run_id]
        started = min(str(d["started_at"]) for d in docs)
        scenarios = [s for s in grouped if any(d["scenario"] == s for d in docs)]
        return started, str(docs[0]["params"].get("command", command)), scenarios

    where = f"on {machine['cpus']} cores, Python {machine['python']}"
    if len(runs) == 1:
        (run_id,) = runs
        started, how, _ = describe(run_id)
        return [f"Run `{run_id}`, started {started}, {where}; reproduce with `{how}`."]
    lines = [f"Each scenario from its latest run, {where}; ratios are only ever taken within one run.", "",
             "| run | started | scenarios | reproduce with |", "| --- | --- | --- | --- |"]
    for run_id in sorted(runs):
        started, how, scenarios = describe(run_id)
        lines.append(f"| `{run_id}` | {started} | {', '.join(scenarios)} | `{how}` |")
    return lines


def _targets_section(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """The goals table (nothing when none of LogBroker's systems ran)."""
    goals = targets(documents)
    if not goals:
        return []
    lines = ["## Targets", "", "| goal | LogBroker ÷ peer | needed | met |", "| --- | --- | --- | --- |"]
    for t in goals:
        if t.ratio is None:
            lines.append(f"| {t.label} | not measured | {t.needed} | — |")
            continue
        against = f"best peer: {t.peer}" if t.best else f"{t.subject} ÷ {t.peer}"
        lines.append(f"| {t.label} | {t.ratio:.2f}× ({against}) | {t.needed} | {'yes' if t.met else 'no'} |")
    return [*lines, ""]


def _scenario_section(scenario: str, docs: Mapping[str, Mapping[str, Any]], rows: Sequence[Row],
                      systems: Sequence[str]) -> list[str]:
    status = {s: _status(docs.get(s)) for s in systems}
    subjects, peers = split(systems)
    pairs = [(s, p) for s in subjects for p in peers]
    header = ["figure", "unit", *systems, *(f"{s} ÷ {p}" for s, p in pairs)]
    lines = [f"## {scenario}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        cells = [_fmt_cell(row.values[s], status[s]) for s in systems]
        lines.append(f"| {row.figure} | {row.unit} | " + " | ".join(cells)
                     + "".join(f" | {_fmt_ratio(row, s, p)}" for s, p in pairs) + " |")
    if not rows:
        lines.append("| (no figures) | | " + " | ".join(status[s] or "—" for s in systems)
                     + " |" * (len(pairs) + 1))
    lines += ["", "Settings:", ""]
    for system in systems:
        d = docs.get(system)
        if d is None:
            lines.append(f"- **{system}**: not run")
            continue
        params = {k: v for k, v in d["params"].items() if k not in ("run_id", "command")}
        lines.append(f"- **{system}**: " + "; ".join(f"{k} = {_param(v)}" for k, v in sorted(params.items())))
    return [*lines, ""]


def _status(document: Mapping[str, Any] | None) -> str | None:
    """What a table cell says for a system without the figure: the status's short form (the
    settings list below the table gives it whole)."""
    if document is None:
        return "not run"
    status = document["params"].get("status")
    return str(status).split(":", 1)[0] if status else None


def _param(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)
