"""The figure of a chaos run: acknowledged writes per second (all partitions and each one, labelled
with the share of seconds that saw an ack), per partition the stretches of more than a second
without an acknowledged write, with every fault's span shaded and labelled by kind, and the worst
ack gap per kind of fault, apart by the faulted node's role for the partition
(``chaos.availability``)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from chaos.availability import ROLES, fault_spans
from chaos.history import Event

GAP_S: Final = 1.0
TARGET_S: Final = 1.0  # what a follower's fault may stop writes for
COLORS: Final = {"kill_leader": "tab:red", "kill_follower": "salmon", "pause_leader": "tab:orange",
                 "pause_follower": "gold", "etcd_kill": "tab:purple", "isolate": "tab:brown",
                 "cut_etcd": "tab:pink", "cut_peers": "tab:olive", "cut_clients": "tab:cyan", "halves": "tab:gray",
                 "slow_disk": "tab:green"}
ROLE_COLORS: Final = {"leader": "tab:red", "follower": "tab:blue", "etcd": "tab:purple", "no_leader": "tab:gray"}


def plot(events: Sequence[Event], summary: Mapping[str, Any], path: str) -> None:
    acks: dict[int, list[float]] = collections.defaultdict(list)
    for e in events:
        if e["f"] == "produce" and e["type"] == "ok":
            acks[int(e["partition"])].append(float(e["time"]))
    availability = summary.get("availability", {})
    shares = availability.get("seconds_with_ack", {})
    end = max((float(e["time"]) for e in events), default=1.0)
    seconds = int(end) + 1
    fig = plt.figure(figsize=(14, 10))
    grid = fig.add_gridspec(3, 1, height_ratios=[2, 1, 1.4])
    top = fig.add_subplot(grid[0])
    middle = fig.add_subplot(grid[1], sharex=top)
    bottom = fig.add_subplot(grid[2])
    total = [0] * seconds
    for partition, times in sorted(acks.items()):
        per = [0] * seconds
        for t in times:
            per[int(t)] += 1
            total[int(t)] += 1
        share = shares.get(str(partition))
        label = f"partition {partition}" + (f" ({share:.0%} of seconds with an ack)" if share is not None else "")
        top.plot(range(seconds), per, linewidth=0.8, label=label)
    top.plot(range(seconds), total, color="black", linewidth=1.2, label="all")
    top.set_ylabel("acked records/s")
    for partition, times in sorted(acks.items()):
        edges = sorted(times)
        gaps = [(a, b - a) for a, b in itertools.pairwise(edges) if b - a > GAP_S]
        middle.broken_barh(gaps, (partition - 0.4, 0.8), color="tab:red")
    middle.set_yticks(sorted(acks))
    middle.set_ylabel("partition\n(no ack > 1 s)")
    middle.set_xlabel("seconds since start")
    seen: set[str] = set()
    for fault in fault_spans(events):
        for ax in (top, middle):
            ax.axvspan(fault.start, fault.end, color=COLORS.get(fault.kind, "tab:blue"), alpha=0.15,
                       label=fault.kind if ax is top and fault.kind not in seen else None)
        seen.add(fault.kind)
    top.legend(loc="upper right", fontsize=7, ncol=3)
    _worst_gaps(bottom, availability.get("worst_ack_gap_by_role_s", {}))
    top.set_title(f"chaos run: {summary.get('records_acked')} acked, lost {summary['anomalies']['lost']}, "
                  f"duplicated {summary['anomalies']['duplicated']}, leader changes {summary.get('leader_changes')}; "
                  f"partition faults: {str(summary.get('partition_faults'))[:60]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _worst_gaps(ax: Any, by_role: Mapping[str, Mapping[str, float]]) -> None:
    """Grouped bars: per fault kind, the worst ack gap by the faulted node's role for the partition, and
    a line at ``TARGET_S``."""
    kinds = sorted(by_role)
    roles = [r for r in ROLES if any(r in by_role[k] for k in kinds)]
    width = 0.8 / max(len(roles), 1)
    for i, role in enumerate(roles):
        xs = [k + i * width for k in range(len(kinds))]
        ax.bar(xs, [by_role[kind].get(role, 0.0) for kind in kinds], width, color=ROLE_COLORS.get(role, "tab:blue"),
               label=f"faulted node was the partition's {role}" if role in ("leader", "follower") else role)
    ax.axhline(TARGET_S, color="black", linestyle="--", linewidth=0.8)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(kinds))], kinds, fontsize=8)
    ax.set_ylabel("worst ack gap (s)")
    ax.legend(loc="upper right", fontsize=7)
