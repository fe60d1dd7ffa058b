"""PNG plots of one run (matplotlib, headless Agg backend): throughput bars per system with
min–max whiskers, and latency percentile curves per rate and size."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.report import by_scenario, systems_of
from benchmarks.stats import LATENCY_PERCENTILES

THROUGHPUT_FIGURES = (
    ("produce", "produce_100b_records_per_s", "produce 100 B"),
    ("produce", "produce_1024b_records_per_s", "produce 1 KiB"),
    ("consume", "consume_100b_records_per_s", "consume 100 B"),
    ("consume", "consume_1024b_records_per_s", "consume 1 KiB"),
    ("queue", "queue_receive_ack_100b_records_per_s", "queue receive+ack 100 B"),
    ("queue", "queue_receive_ack_1024b_records_per_s", "queue receive+ack 1 KiB"),
    ("replication", "produce_r1_records_per_s", "produce 100 B, cluster, 1 replica"),
    ("replication", "produce_r3_records_per_s", "produce 100 B, cluster, 3 replicas"),
)
COLORS = {"logbroker": "#1f77b4", "logbroker-kafka": "#9467bd", "nats": "#2ca02c", "rabbitmq": "#ff7f0e"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def throughput_plot(documents: Sequence[Mapping[str, Any]], path: str) -> str | None:
    """Grouped bars (records/s, log scale) per workload and system; None when nothing to plot."""
    grouped = by_scenario(documents)
    systems = systems_of(documents)
    groups = [(label, scenario, name) for scenario, name, label in THROUGHPUT_FIGURES
              if any(name in d["figures"] for d in grouped.get(scenario, {}).values())]
    if not groups:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        xs, ys, low, high = [], [], [], []
        for g, (_label, scenario, name) in enumerate(groups):
            figures = grouped.get(scenario, {}).get(system, {}).get("figures", {})
            if name in figures:
                xs.append(g + (i - (len(systems) - 1) / 2) * width)
                ys.append(figures[name])
                low.append(figures[name] - figures.get(f"{name}_min", figures[name]))
                high.append(figures.get(f"{name}_max", figures[name]) - figures[name])
        ax.bar(xs, ys, width, yerr=[low, high], capsize=3, label=system, color=COLORS.get(system))
    ax.set_xticks(range(len(groups)), [label for label, _, _ in groups], rotation=15)
    ax.set_yscale("log")
    ax.set_ylabel("records/s (median, min–max)")
    ax.set_title("Throughput, each system with its own Python client")
    ax.legend()
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def latency_plot(documents: Sequence[Mapping[str, Any]], path: str, rates: Sequence[int],
                 sizes: Sequence[int] = (100, 1024)) -> str | None:
    """One panel per (rate, size): end-to-end latency against percentile, one curve per system."""
    docs = by_scenario(documents).get("latency", {})
    if not docs:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(sizes), len(rates), figsize=(4 * len(rates), 3.4 * len(sizes)), squeeze=False)
    ranks = [name for name, _ in LATENCY_PERCENTILES if name != "max"]
    labels = {"p50": "50", "p90": "90", "p99": "99", "p999": "99.9"}
    for row, size in enumerate(sizes):
        for col, rate in enumerate(rates):
            ax = axes[row][col]
            for system in systems_of(documents):
                figures = docs.get(system, {}).get("figures", {})
                ys = [figures.get(f"latency_{rate}_{size}b_{r}_ms") for r in ranks]
                if all(y is not None for y in ys):
                    ax.plot(range(len(ranks)), ys, marker="o", label=system, color=COLORS.get(system))
            ax.set_xticks(range(len(ranks)), [labels[r] for r in ranks])
            ax.set_yscale("log")
            ax.set_title(f"{rate:,}/s, {size} B")
            ax.set_xlabel("percentile")
            ax.set_ylabel("ms")
            ax.grid(alpha=0.3, which="both")
    axes[0][0].legend()
    fig.suptitle("End-to-end latency (median of repetitions) at fixed rates")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_plots(documents: Sequence[Mapping[str, Any]], out_dir: str, rates: Sequence[int]) -> list[tuple[str, str]]:
    """Write every plot that has data; returns (title, file name) pairs for the report."""
    made = []
    if throughput_plot(documents, os.path.join(out_dir, "throughput.png")):
        made.append(("Throughput", "throughput.png"))
    if latency_plot(documents, os.path.join(out_dir, "latency.png"), rates):
        made.append(("Latency percentiles", "latency.png"))
    return made
