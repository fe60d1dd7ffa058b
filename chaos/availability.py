"""Availability of a chaos run, as pure functions from its events: per partition, the share of
whole seconds of the fault window that saw an acknowledged write, and, per kind of fault, the
longest time a partition went without one.

A gap (two consecutive acknowledged writes of a partition, or the window's edges) is charged to
the fault whose time overlaps it most, a fault's time running from its start until the next
fault begins (``none`` before the first): faults come one at a time with quiet between them, so
an outage that outlives its fault (a restart, a failback, a rejoin) is still its own, and a gap
whose last ack came just before a fault is that fault's. The faulted node's role for that
partition at the fault's start (from the ``leader`` events the watcher recorded; ``leader`` too
when it took the lead as the fault began) is kept with it: ``leader`` (failover is expected
to take a moment), ``follower`` (writes should not stop), ``etcd`` (the coordinator itself),
``no_leader`` (the partition had none just then).

The follower figure (``worst_ack_gap_follower_faults_s``) counts a gap charged to a follower's
fault only when every fault active (from its start to its heal) during the gap was a follower's
of that partition: a gap that began while the leader was cut off, or that a leader's pause
overlaps, is the leader's trouble, not the follower's. Two followers' faults together still count
(the ISR at its minimum stops ``acks=all`` writes, and that is charged). The gaps left out are
reported apart (``worst_ack_gap_follower_faults_overlapped_s``), so nothing is hidden.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from chaos.history import Event

NO_FAULT: Final = "none"
ROLES: Final = ("leader", "follower", "etcd", "no_leader")
# Faults that also cut the other nodes (from etcd): no fault of the target alone, whatever its role.
SPLITS: Final = frozenset({"halves"})
# How soon after a fault's start a faulted follower seen leading was already taking the lead as it
# began (the watcher polls each node: what it records lags the change by up to a poll or two).
TAKEOVER_S: Final = 1.0


@dataclasses.dataclass(frozen=True)
class Fault:
    start: float
    end: float
    kind: str
    target: str  # "node-N" or "etcd"


@dataclasses.dataclass(frozen=True)
class Gap:
    partition: int
    start: float
    end: float
    fault: str
    target: str
    role: str
    roles: frozenset[str] = frozenset()  # ``role``, and the faulted node's in each fault active during the gap

    @property
    def length(self) -> float:
        return self.end - self.start


def fault_spans(events: Iterable[Event]) -> list[Fault]:
    """The faults in the order dealt (a fault never healed has no span)."""
    spans, begun = [], None
    for e in events:
        if e["f"] != "fault":
            continue
        if e["type"] == "start":
            begun = e
        elif e["type"] == "end" and begun is not None:
            spans.append(Fault(float(begun["time"]), float(e["time"]), str(begun["fault"]), str(begun["target"])))
            begun = None
    return spans


def ack_times(events: Iterable[Event], partitions: Iterable[int]) -> dict[int, list[float]]:
    """Per partition, the sorted times of its acknowledged writes."""
    times: dict[int, list[float]] = {p: [] for p in partitions}
    for e in events:
        if e["f"] == "produce" and e["type"] == "ok":
            times.setdefault(int(e["partition"]), []).append(float(e["time"]))
    for acks in times.values():
        acks.sort()
    return times


def seconds_with_ack(acks: Sequence[float], start: float, end: float) -> float:
    """The share of the whole seconds ``[start + k, start + k + 1)`` in ``[start, end)`` holding at
    least one acknowledged write (``acks`` sorted); 1.0 for a window shorter than a second."""
    seconds = int(end - start)
    if seconds <= 0:
        return 1.0
    covered = {int(t - start) for t in acks if start <= t < start + seconds}
    return len(covered) / seconds


def gaps(acks: Sequence[float], start: float, end: float) -> list[tuple[float, float]]:
    """The stretches without an acknowledged write between ``start`` and ``end`` (``acks`` sorted)."""
    inside = [t for t in acks if start <= t <= end]
    return list(itertools.pairwise([start, *inside, end]))


def leader_timelines(events: Iterable[Event], topic: str) -> dict[int, list[tuple[float, int]]]:
    """Per partition of ``topic``, ``(time, leader)`` as the watcher saw it change (-1: none)."""
    timelines: dict[int, list[tuple[float, int]]] = {}
    prefix = topic + "/"
    for e in events:
        if e["f"] == "leader" and str(e["partition"]).startswith(prefix):
            number = str(e["partition"])[len(prefix):]
            if number.isdigit():
                timelines.setdefault(int(number), []).append((float(e["time"]), int(e["leader"])))
    for timeline in timelines.values():
        timeline.sort()
    return timelines


def leader_at(timeline: Sequence[tuple[float, int]], at: float) -> int:
    """The leader last seen at or before ``at`` (-1: none yet, or none then)."""
    i = bisect.bisect_right(timeline, (at, float("inf")))
    return timeline[i - 1][1] if i else -1


def led_during(timeline: Sequence[tuple[float, int]], node: int, start: float, end: float) -> bool:
    """The watcher saw ``node`` take the lead in ``(start, end]``."""
    i = bisect.bisect_right(timeline, (start, float("inf")))
    return any(leader == node for at, leader in timeline[i:] if at <= end)


def fault_role(fault: Fault, timeline: Sequence[tuple[float, int]], until: float) -> str:
    """The faulted node's role for a partition: at the fault's start, or ``leader`` when the
    watcher saw it take the lead within ``TAKEOVER_S`` of the fault's start (and before
    ``until``): a failback handed to it just as it was paused makes its pause a leader's. A lead
    taken later in the fault (an election that picked a faulted node) leaves it a follower's, so
    it is not hidden from the follower figures."""
    found = role(fault.target, leader_at(timeline, fault.start))
    if found == "follower" and led_during(timeline, int(fault.target[len("node-"):]), fault.start,
                                          min(fault.end, until, fault.start + TAKEOVER_S)):
        return "leader"
    return found


def role(target: str, leader: int) -> str:
    """What ``target`` was to a partition led by ``leader``."""
    if not target.startswith("node-"):
        return "etcd"
    if leader < 0:
        return "no_leader"
    return "leader" if target == f"node-{leader}" else "follower"


def charged_gaps(acks: Mapping[int, Sequence[float]], faults: Sequence[Fault],
                 leaders: Mapping[int, Sequence[tuple[float, int]]], start: float, end: float) -> list[Gap]:
    """Every gap of every partition in ``[start, end]``, charged to the fault whose time (from
    its start until the next fault's) overlaps it most."""
    starts = [f.start for f in faults]
    charged = []
    for partition, times in sorted(acks.items()):
        for begun, ended in gaps(times, start, end):
            first = bisect.bisect_right(starts, begun)  # faults[first - 1] is in force when the gap begins
            cuts = [begun, *starts[first:bisect.bisect_left(starts, ended)], ended]
            _, index = max((b - a, first - 1 + i) for i, (a, b) in enumerate(itertools.pairwise(cuts)))
            if index < 0:
                charged.append(Gap(partition, begun, ended, NO_FAULT, "", ""))
                continue
            timeline = leaders.get(partition, ())
            fault = faults[index]
            charged_role = fault_role(fault, timeline, ended)
            active = faults[:first + len(cuts) - 2]  # begun before the gap ended
            roles = frozenset({charged_role}).union(
                "split" if f.kind in SPLITS else fault_role(f, timeline, ended)
                for f in active if f.end > begun)
            charged.append(Gap(partition, begun, ended, fault.kind, fault.target, charged_role, roles))
    return charged


def worst(found: Iterable[Gap]) -> dict[str, Gap]:
    """The longest gap per fault kind."""
    longest: dict[str, Gap] = {}
    for gap in found:
        if gap.fault not in longest or gap.length > longest[gap.fault].length:
            longest[gap.fault] = gap
    return longest


def report(events: Sequence[Event], topic: str, partitions: Iterable[int], window: tuple[float, float]
           ) -> dict[str, Any]:
    """The availability part of a run's summary (JSON-ready): the share of seconds with an ack per
    partition, the worst ack gap per fault kind (over every partition, and apart by the faulted
    node's role for the partition), and where each worst gap was."""
    start, end = window
    acks = ack_times(events, partitions)
    found = charged_gaps(acks, fault_spans(events), leader_timelines(events, topic), start, end)
    by_kind = worst(found)
    by_role: dict[str, dict[str, float]] = {}
    for kind_role in ROLES:
        for kind, gap in worst(g for g in found if g.role == kind_role).items():
            by_role.setdefault(kind, {})[kind_role] = round(gap.length, 3)
    followers = [g for g in found if g.role == "follower" and g.fault not in SPLITS]
    alone = [g for g in followers if g.roles == {"follower"}]
    return {
        "seconds_with_ack": {str(p): round(seconds_with_ack(t, start, end), 4) for p, t in sorted(acks.items())},
        "worst_ack_gap_s": {kind: round(g.length, 3) for kind, g in sorted(by_kind.items())},
        "worst_ack_gap_by_role_s": dict(sorted(by_role.items())),
        "worst_ack_gap_follower_faults_s": round(max((g.length for g in alone), default=0.0), 3),
        "worst_ack_gap_follower_faults_overlapped_s": round(max((g.length for g in followers), default=0.0), 3),
        "worst_ack_gap_at": {kind: {"partition": g.partition, "from": round(g.start, 3), "to": round(g.end, 3),
                                    "target": g.target, "role": g.role} for kind, g in sorted(by_kind.items())},
    }
