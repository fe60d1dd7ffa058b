"""The figure of a chaos run: acknowledged writes per second (all partitions and each one) and, per
partition, the stretches of more than a second without an acknowledged write, with every fault's
span shaded and labelled by kind."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from chaos.history import Event

GAP_S: Final = 1.0
COLORS: Final = {"kill_leader": "tab:red", "kill_follower": "salmon", "pause_leader": "tab:orange",
                 "pause_follower": "gold", "etcd_kill": "tab:purple", "isolate": "tab:brown",
                 "cut_etcd": "tab:pink", "cut_peers": "tab:olive", "cut_clients": "tab:cyan", "halves": "tab:gray"}


def fault_spans(events: Sequence[Event]) -> list[tuple[float, float, str, str]]:
    spans, open_ = [], None
    for e in events:
        if e["f"] == "fault" and e["type"] == "start":
            open_ = e
        elif e["f"] == "fault" and e["type"] == "end" and open_ is not None:
            spans.append((float(open_["time"]), float(e["time"]), str(e["fault"]), str(e["target"])))
            open_ = None
    return spans


def plot(events: Sequence[Event], summary: Mapping[str, Any], path: str) -> None:
    acks: dict[int, list[float]] = collections.defaultdict(list)
    for e in events:
        if e["f"] == "produce" and e["type"] == "ok":
            acks[int(e["partition"])].append(float(e["time"]))
    end = max((float(e["time"]) for e in events), default=1.0)
    seconds = int(end) + 1
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 7), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    total = [0] * seconds
    for partition, times in sorted(acks.items()):
        per = [0] * seconds
        for t in times:
            per[int(t)] += 1
            total[int(t)] += 1
        top.plot(range(seconds), per, linewidth=0.8, label=f"partition {partition}")
    top.plot(range(seconds), total, color="black", linewidth=1.2, label="all")
    top.set_ylabel("acked records/s")
    for partition, times in sorted(acks.items()):
        edges = sorted(times)
        gaps = [(a, b - a) for a, b in itertools.pairwise(edges) if b - a > GAP_S]
        bottom.broken_barh(gaps, (partition - 0.4, 0.8), color="tab:red")
    bottom.set_yticks(sorted(acks))
    bottom.set_ylabel("partition\n(no ack > 1 s)")
    bottom.set_xlabel("seconds since start")
    seen: set[str] = set()
    for start, stop, kind, _ in fault_spans(events):
        for ax in (top, bottom):
            ax.axvspan(start, stop, color=COLORS.get(kind, "tab:blue"), alpha=0.15,
                       label=kind if ax is top and kind not in seen else None)
        seen.add(kind)
    top.legend(loc="upper right", fontsize=7, ncol=3)
    top.set_title(f"chaos run: {summary.get('records_acked')} acked, lost {summary['anomalies']['lost']}, "
                  f"duplicated {summary['anomalies']['duplicated']}, leader changes {summary.get('leader_changes')}; "
                  f"partition faults: {str(summary.get('partition_faults'))[:60]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
