"""Which partitions a node hosts and when it stands for leadership: pure rules over the
coordinator's ``PartitionState`` (no I/O), so that every node of a cluster decides alike.

Invariants:
- a node hosts (keeps a log for) exactly the partitions whose replica list names it;
- only a member of the ISR stands (no unclean election), or, when no member of the ISR is alive,
  a member of the eligible leader replicas (ELR, ``coordinator.eligibility``: it holds every
  acknowledged record); for a leaderless partition exactly one live node is the candidate: the
  preferred replica (``replicas[0]``) when it is alive and in sync, else the first live in-sync
  replica in replica order (else the first live ELR member). With the topic's ``leader_racks``
  the live in-sync replicas are ranked by rack first (``coordinator.leader_racks``), replica order
  second. Two nodes that see the same state never both stand; if views differ, the election
  transaction (DESIGN §5) still admits only one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from coordinator.leader_racks import leader_racks, node_ranks
from coordinator.models import PartitionState

NO_LEADER = -1


def hosts(state: PartitionState, node_id: int) -> bool:
    return node_id in state.replicas


def candidate(state: PartitionState, alive: Collection[int], ranks: Mapping[int, int] | None = None) -> int | None:
    """The node that should stand for leadership of ``state``'s partition now, or None (it has a
    leader, or no in-sync replica is alive). ``ranks``: each node's rank under the topic's
    ``leader_racks`` (lower first; a node not in it ranks with 0)."""
    if state.leader != NO_LEADER:
        return None
    for eligible in (state.isr, state.elr):
        standing = [(rank_of(ranks, node), position, node) for position, node in enumerate(state.replicas)
                    if node in eligible and node in alive]
        if standing:
            return min(standing)[2]
    return None


def should_stand(state: PartitionState, node_id: int, alive: Collection[int],
                 ranks: Mapping[int, int] | None = None) -> bool:
    return candidate(state, alive, ranks) == node_id


def topic_ranks(config: Mapping[str, object], racks: Mapping[int, str | None]) -> dict[int, int] | None:
    """Each node's rank under a topic's ``leader_racks`` (``racks``: the nodes' racks), or None
    when the topic has no preference."""
    preference = leader_racks(config)
    return node_ranks(racks, preference) if preference else None


def rank_of(ranks: Mapping[int, int] | None, node: int) -> int:
    return 0 if ranks is None else ranks.get(node, 0)
