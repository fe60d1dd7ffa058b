"""Which partitions a node hosts and when it stands for leadership: pure rules over the
coordinator's ``PartitionState`` (no I/O), so that every node of a cluster decides alike.

Invariants:
- a node hosts (keeps a log for) exactly the partitions whose replica list names it;
- only a member of the ISR stands (no unclean election), and for a leaderless partition exactly
  one live node is the candidate: the preferred replica (``replicas[0]``) when it is alive and in
  sync, else the first live in-sync replica in replica order. Two nodes that see the same state
  never both stand; if views differ, the election transaction (DESIGN §5) still admits only one.
"""

from __future__ import annotations

from collections.abc import Collection

from coordinator.models import PartitionState

NO_LEADER = -1


def hosts(state: PartitionState, node_id: int) -> bool:
    return node_id in state.replicas


def candidate(state: PartitionState, alive: Collection[int]) -> int | None:
    """The node that should stand for leadership of ``state``'s partition now, or None (it has a
    leader, or no in-sync replica is alive)."""
    if state.leader != NO_LEADER:
        return None
    for node in state.replicas:
        if node in state.isr and node in alive:
            return node
    return None


def should_stand(state: PartitionState, node_id: int, alive: Collection[int]) -> bool:
    return candidate(state, alive) == node_id
