"""Partition assignment strategies for consumer groups (pure functions, no I/O).

Input: each member's subscribed topics and each topic's partition count; output: for each member,
``{topic: [partition, ...]}`` (sorted). Invariants every strategy keeps, proved by property tests:

- no topic-partition is assigned to two members;
- every partition of a subscribed topic is assigned when at least one member subscribes to it;
- a member only gets partitions of topics it subscribes to;
- per topic, members' counts differ by at most one (all three strategies balance per topic).

``sticky`` also takes the previous assignment and moves as few partitions as that balance allows:
a surviving member keeps ``min(what it held, its quota)`` of each topic's partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

Strategy = Literal["range", "round_robin", "sticky"]
STRATEGIES: Final = ("range", "round_robin", "sticky")
Assignment = dict[str, dict[str, list[int]]]
Subscriptions = Mapping[str, Sequence[str]]


def _subscribers(subscriptions: Subscriptions, topic: str) -> list[str]:
    return sorted(m for m, topics in subscriptions.items() if topic in topics)


def _empty(subscriptions: Subscriptions) -> Assignment:
    return {member: {} for member in subscriptions}


def _give(out: Assignment, member: str, topic: str, partition: int) -> None:
    out[member].setdefault(topic, []).append(partition)


def _sorted(out: Assignment) -> Assignment:
    return {m: {t: sorted(ps) for t, ps in sorted(topics.items())} for m, topics in out.items()}


def range_assign(subscriptions: Subscriptions, partitions: Mapping[str, int]) -> Assignment:
    """Per topic, contiguous ranges of partitions to the subscribers in member-id order (the first
    ``count % members`` members get one more)."""
    out = _empty(subscriptions)
    for topic in sorted(partitions):
        members = _subscribers(subscriptions, topic)
        if not members:
            continue
        count = partitions[topic]
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            for p in range(start, start + size):
                _give(out, member, topic, p)
            start += size
    return _sorted(out)


def round_robin_assign(subscriptions: Subscriptions, partitions: Mapping[str, int]) -> Assignment:
    """Per topic, partition ``p`` to subscriber ``p % n``, the starting member rotating from topic to
    topic so that the extra partitions of uneven topics spread over the members."""
    out = _empty(subscriptions)
    rotation = 0
    for topic in sorted(partitions):
        members = _subscribers(subscriptions, topic)
        if not members:
            continue
        for p in range(partitions[topic]):
            _give(out, members[(p + rotation) % len(members)], topic, p)
        rotation += partitions[topic]
    return _sorted(out)


def sticky_assign(subscriptions: Subscriptions, partitions: Mapping[str, int],
                  previous: Mapping[str, Mapping[str, Sequence[int]]]) -> Assignment:
    """Balanced per topic like the others, keeping each surviving member's previous partitions up
    to its quota; only excess partitions and those of departed members move."""
    out = _empty(subscriptions)
    for topic in sorted(partitions):
        members = _subscribers(subscriptions, topic)
        if not members:
            continue
        count = partitions[topic]
        held = {m: sorted({p for p in previous.get(m, {}).get(topic, ()) if 0 <= p < count}) for m in members}
        _drop_duplicates(held)
        share, extra = divmod(count, len(members))
        # The members that already hold the most get the ``extra`` larger quotas: fewer moves.
        by_holding = sorted(members, key=lambda m: (-len(held[m]), m))
        quota = {m: share + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
        kept = {m: held[m][:quota[m]] for m in members}
        taken = {p for ps in kept.values() for p in ps}
        free = [p for p in range(count) if p not in taken]
        for m in members:
            need = quota[m] - len(kept[m])
            kept[m] += free[:need]
            free = free[need:]
        assert not free, "every partition of a subscribed topic is assigned"
        for m, ps in kept.items():
            if ps:
                out[m][topic] = ps
    return _sorted(out)


def _drop_duplicates(held: dict[str, list[int]]) -> None:
    """A previous assignment never has a partition twice; if one is handed in, the first member in
    id order keeps it."""
    seen: set[int] = set()
    for member in sorted(held):
        held[member] = [p for p in held[member] if p not in seen]
        seen.update(held[member])


def assign(strategy: Strategy, subscriptions: Subscriptions, partitions: Mapping[str, int],
           previous: Mapping[str, Mapping[str, Sequence[int]]] | None = None) -> Assignment:
    """Run ``strategy`` (``previous`` is used by ``sticky`` only)."""
    plain: dict[str, Callable[[Subscriptions, Mapping[str, int]], Assignment]] = {
        "range": range_assign, "round_robin": round_robin_assign}
    if strategy == "sticky":
        return sticky_assign(subscriptions, partitions, previous or {})
    return plain[strategy](subscriptions, partitions)
