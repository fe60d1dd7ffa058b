"""The history checker: pure functions from a run's events and the logs read at its end to the
anomalies found and a summary.

What it reads (``chaos.history`` describes the common keys):

- ``produce``: ``invoke`` with ``value``, ``partition``, ``seq`` (the producer's own count);
  ``ok`` with ``value``, ``partition``, ``offset`` (acknowledged, ``acks=all``); ``fail``/``info``
  with ``value`` (the outcome is unknown to the checker either way: a refusal after the append,
  503 ``not_enough_replicas``, still stored the record).
- ``read``: ``ok`` with ``partition`` and ``records`` (``[offset, value]`` pairs a consumer got).
- ``commit``: ``ok`` with ``offsets`` (``[partition, offset]`` pairs a group member committed);
  ``committed``: ``ok`` with ``invoke_time`` and ``offsets`` (the group's offsets as read back).
- ``queue_send``: ``ok``/``info`` with ``value``; ``deliver``: ``ok`` with ``invoke_time`` and
  ``values`` (``[value, delivery_count, id]``, the id ``partition:offset``); ``queue_ack``: ``ok``
  with ``ids`` (every one acked; a partial answer is ``info``).
- ``leader``: ``partition`` (``topic/partition``), ``leader``, ``epoch`` as the cluster showed them.

``log`` is the authoritative log read through the cluster at the end, ``{partition: {offset:
value}}``, up to each partition's high watermark; ``replicas`` is every node's own copy,
``{node: {partition: {offset: value}}}``, compared with ``log`` below that high watermark.

The compacted topic's checks (by key: ``kv_write`` events) are ``chaos.compacted``'s; ``check``
takes their result and counts its anomalies with the others.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chaos.compacted import CompactedResult
from chaos.history import Event

Log = Mapping[int, Mapping[int, str]]


@dataclasses.dataclass(frozen=True)
class Acked:
    process: str
    value: str
    partition: int
    offset: int
    time: float


def acked_writes(events: Iterable[Event]) -> list[Acked]:
    return [Acked(e["process"], e["value"], int(e["partition"]), int(e["offset"]), float(e["time"]))
            for e in events if e["f"] == "produce" and e["type"] == "ok"]


def lost_and_misplaced(acked: Iterable[Acked], log: Log) -> tuple[list[Acked], list[Acked]]:
    """Acknowledged records stored nowhere (lost), and those not at their acknowledged offset."""
    where: dict[str, tuple[int, int]] = {v: (p, o) for p, records in log.items() for o, v in records.items()}
    lost: list[Acked] = []
    misplaced: list[Acked] = []
    for a in acked:
        if log.get(a.partition, {}).get(a.offset) == a.value:
            continue
        (misplaced if a.value in where else lost).append(a)
    return lost, misplaced


def duplicates(log: Log) -> dict[str, int]:
    """Values stored more than once (in any partitions), with their counts."""
    counts = collections.Counter(v for records in log.values() for v in records.values())
    return {v: n for v, n in counts.items() if n > 1}


def order_violations(events: Iterable[Event]) -> list[tuple[str, int, str, str]]:
    """Pairs of one producer's acknowledged records of one partition stored in the other order than
    sent: ``(process, partition, earlier value, later value)``."""
    seq = {(e["process"], e["value"]): int(e["seq"]) for e in events if e["f"] == "produce" and e["type"] == "invoke"}
    by_stream: dict[tuple[str, int], list[tuple[int, int, str]]] = collections.defaultdict(list)
    for a in acked_writes(events):
        by_stream[(a.process, a.partition)].append((seq.get((a.process, a.value), -1), a.offset, a.value))
    found = []
    for (process, partition), writes in sorted(by_stream.items()):
        writes.sort()
        for (_, o1, v1), (_, o2, v2) in itertools.pairwise(writes):
            if o2 <= o1:
                found.append((process, partition, v1, v2))
    return found


def replica_conflicts(log: Log, replicas: Mapping[str, Log]) -> list[tuple[str, int, int, str, str]]:
    """Offsets below the final high watermark where a replica holds another value than the log:
    ``(node, partition, offset, log's value, replica's value)``."""
    found = []
    for node, copy in sorted(replicas.items()):
        for partition, records in sorted(copy.items()):
            agreed = log.get(partition, {})
            end = max(agreed, default=-1) + 1
            for offset, value in sorted(records.items()):
                if offset < end and agreed.get(offset) != value:
                    found.append((node, partition, offset, str(agreed.get(offset)), value))
    return found


def dirty_reads(events: Iterable[Event], log: Log) -> list[tuple[str, int, int, str]]:
    """Records a consumer got that the final log does not hold there: ``(process, partition,
    offset, value)``."""
    return [(e["process"], int(e["partition"]), int(o), v) for e in events if e["f"] == "read" and e["type"] == "ok"
            for o, v in e["records"] if log.get(int(e["partition"]), {}).get(int(o)) != v]


def _sweep(done: list[tuple[float, int]], started: list[tuple[float, int, Event]]) -> list[tuple[Event, int]]:
    """Each started observation whose offset is below one completed before it began."""
    done.sort()
    times = [t for t, _ in done]
    best, running = [], -1
    for _, offset in done:
        running = max(running, offset)
        best.append(running)
    found = []
    for begun, offset, event in started:
        i = bisect.bisect_left(times, begun)
        if i and best[i - 1] > offset:
            found.append((event, best[i - 1]))
    return found


def commit_regressions(events: Iterable[Event]) -> list[dict[str, Any]]:
    """A group's committed offset of a partition going backwards: a commit acknowledged, or an
    offset read back, lower than one acknowledged or read back before it began."""
    done: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
    started: dict[int, list[tuple[float, int, Event]]] = collections.defaultdict(list)
    for e in events:
        if e["type"] != "ok" or e["f"] not in ("commit", "committed"):
            continue
        begun = float(e.get("invoke_time") or e["time"])
        for partition, offset in e["offsets"]:
            done[int(partition)].append((float(e["time"]), int(offset)))
            started[int(partition)].append((begun, int(offset), e))
    return [{"partition": p, "offset": event_offset, "earlier": earlier, "process": event["process"],
             "time": event["time"]}
            for p in sorted(done) for event, earlier in _sweep(done[p], started[p])
            for q, event_offset in event["offsets"] if int(q) == p]


def queue_redeliveries(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Messages delivered by a receive that began after their acknowledgement was answered."""
    acked_at: dict[str, float] = {}
    deliveries = []
    for e in events:
        if e["f"] == "queue_ack" and e["type"] == "ok":
            for message in e["ids"]:
                acked_at[message] = min(acked_at.get(message, float(e["time"])), float(e["time"]))
        elif e["f"] == "deliver" and e["type"] == "ok":
            deliveries.append(e)
    return [{"id": message, "value": value, "acked": acked_at[message], "received": e["invoke_time"],
             "process": e["process"], "delivery_count": count}
            for e in deliveries for value, count, message in e["values"]
            if message in acked_at and float(e["invoke_time"]) > acked_at[message]]


def queue_lost(events: Iterable[Event]) -> list[str]:
    """Messages whose send was acknowledged and that no receiver ever got (meaningful once the
    queue was drained)."""
    events = list(events)
    delivered = {value for e in events if e["f"] == "deliver" and e["type"] == "ok" for value, _, _ in e["values"]}
    return sorted(e["value"] for e in events
                  if e["f"] == "queue_send" and e["type"] == "ok" and e["value"] not in delivered)


def unavailability(events: Iterable[Event], partitions: Iterable[int], start: float,
                   end: float) -> dict[int, tuple[float, float, float]]:
    """Per partition, the longest time without an acknowledged write between ``start`` and ``end``:
    ``(length, from, to)``."""
    times: dict[int, list[float]] = {p: [] for p in partitions}
    for e in events:
        if e["f"] == "produce" and e["type"] == "ok" and start <= float(e["time"]) <= end:
            times.setdefault(int(e["partition"]), []).append(float(e["time"]))
    longest = {}
    for partition, acks in times.items():
        edges = [start, *sorted(acks), end]
        gap = max(itertools.pairwise(edges), key=lambda pair: pair[1] - pair[0])
        longest[partition] = (round(gap[1] - gap[0], 3), gap[0], gap[1])
    return longest


def leader_changes(events: Iterable[Event]) -> dict[str, int]:
    """Per ``topic/partition``, how often its (leader, epoch) changed after it was first seen
    (a partition without a leader for a moment is no change; the next leader is)."""
    last: dict[str, tuple[int, int]] = {}
    changes: dict[str, int] = collections.defaultdict(int)
    for e in events:
        if e["f"] != "leader" or int(e["leader"]) < 0:
            continue
        now = (int(e["leader"]), int(e["epoch"]))
        before = last.get(e["partition"])
        if before is not None and now != before:
            changes[e["partition"]] += 1
        last[e["partition"]] = now
    return dict(changes)


@dataclasses.dataclass
class Result:
    acked: int
    unknown: int
    unknown_stored: int
    lost: list[Acked]
    misplaced: list[Acked]
    duplicated: dict[str, int]
    reordered: list[tuple[str, int, str, str]]
    replica_conflicts: list[tuple[str, int, int, str, str]]
    dirty_reads: list[tuple[str, int, int, str]]
    commit_regressions: list[dict[str, Any]]
    commits: int
    queue_sent: int
    queue_acked: int
    queue_redelivered_after_ack: list[dict[str, Any]]
    queue_lost: list[str] | None
    leader_changes: dict[str, int]
    unavailability: dict[int, tuple[float, float, float]]
    compacted: CompactedResult | None = None  # None: the run had no compacted topic

    @property
    def anomalies(self) -> dict[str, int]:
        return {"lost": len(self.lost), "misplaced": len(self.misplaced), "duplicated": len(self.duplicated),
                "reordered": len(self.reordered), "replica_conflicts": len(self.replica_conflicts),
                "dirty_reads": len(self.dirty_reads), "commit_regressions": len(self.commit_regressions),
                "queue_redelivered_after_ack": len(self.queue_redelivered_after_ack),
                "queue_lost": len(self.queue_lost or ()),
                **(self.compacted.anomalies if self.compacted is not None else {})}

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self) -> dict[str, Any]:
        return {"valid": self.valid, "records_acked": self.acked, "records_unknown": self.unknown,
                "records_unknown_stored": self.unknown_stored, "anomalies": self.anomalies,
                "leader_changes": sum(self.leader_changes.values()),
                "leader_changes_by_partition": dict(sorted(self.leader_changes.items())),
                "longest_unavailability_s": {str(p): w[0] for p, w in sorted(self.unavailability.items())},
                "longest_unavailability_window": {str(p): [w[1], w[2]] for p, w in sorted(self.unavailability.items())},
                "commits_acked": self.commits, "queue_sent_acked": self.queue_sent,
                "queue_acked": self.queue_acked, "queue_drained": self.queue_lost is not None,
                "examples": {"lost": [dataclasses.asdict(a) for a in self.lost[:10]],
                             "misplaced": [dataclasses.asdict(a) for a in self.misplaced[:10]],
                             "duplicated": dict(list(self.duplicated.items())[:10]),
                             "reordered": self.reordered[:10], "replica_conflicts": self.replica_conflicts[:10],
                             "dirty_reads": self.dirty_reads[:10], "commit_regressions": self.commit_regressions[:10],
                             "queue_redelivered_after_ack": self.queue_redelivered_after_ack[:10],
                             "queue_lost": (self.queue_lost or [])[:10]},
                "compacted_topic": ({"checked": True, **self.compacted.summary()} if self.compacted is not None
                                    else {"checked": False})}


def check(events: Sequence[Event], log: Log, replicas: Mapping[str, Log], *, partitions: Iterable[int],
          window: tuple[float, float], queue_drained: bool = False,
          compacted: CompactedResult | None = None) -> Result:
    """Every check over one run. ``window``: the span (run seconds) the unavailability is measured
    in; ``queue_drained``: the queue was read until empty at the end, so an acknowledged message
    never delivered is lost; ``compacted``: the compacted topic's checks
    (``chaos.compacted.check_compacted``), when the run had one."""
    acked = acked_writes(events)
    lost, misplaced = lost_and_misplaced(acked, log)
    stored = {v for records in log.values() for v in records.values()}
    unknown = {e["value"] for e in events if e["f"] == "produce" and e["type"] in ("fail", "info")}
    return Result(
        acked=len(acked), unknown=len(unknown), unknown_stored=len(unknown & stored), lost=lost,
        misplaced=misplaced, duplicated=duplicates(log), reordered=order_violations(events),
        replica_conflicts=replica_conflicts(log, replicas), dirty_reads=dirty_reads(events, log),
        commit_regressions=commit_regressions(events),
        commits=sum(1 for e in events if e["f"] == "commit" and e["type"] == "ok"),
        queue_sent=sum(1 for e in events if e["f"] == "queue_send" and e["type"] == "ok"),
        queue_acked=sum(len(e["ids"]) for e in events if e["f"] == "queue_ack" and e["type"] == "ok"),
        queue_redelivered_after_ack=queue_redeliveries(events),
        queue_lost=queue_lost(events) if queue_drained else None,
        leader_changes=leader_changes(events), unavailability=unavailability(events, partitions, *window),
        compacted=compacted)
