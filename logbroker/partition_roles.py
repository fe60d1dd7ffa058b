"""Which partitions a node hosts and when it stands for leadership: pure rules over the
coordinator's ``PartitionState`` (no I/O), so that every node of a cluster decides alike.

Invariants:
- a node hosts (keeps a log for) exactly the partitions whose replica list names it;
- only a member of the ISR stands (no unclean election), or, when no member of the ISR is alive,
  a member of the eligible leader replicas (ELR, ``coordinator.eligibility``: it holds every
  acknowledged record); for a leaderless partition exactly one live node is the candidate: the
  preferred replica (``replicas[0]``) when it is alive and in sync, else the first live in-sync
  replica in replica order (else the first live ELR member); after each ``ELECTION_GRACE_MS``
  without a leader, the next one in that order (decision 0384). With the topic's ``leader_racks``
  the live in-sync replicas are ranked by rack first (``coordinator.leader_racks``), replica order
  second. Two nodes that see the same state never both stand; if views differ, the election
  transaction (DESIGN §5) still admits only one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from coordinator.leader_racks import leader_racks, node_ranks
from coordinator.models import PartitionState

NO_LEADER = -1
ELECTION_GRACE_MS: Final = 500  # a candidate that has not taken a leaderless partition by then is passed over


def hosts(state: PartitionState, node_id: int) -> bool:
    return node_id in state.replicas


def candidate(state: PartitionState, alive: Collection[int], ranks: Mapping[int, int] | None = None,
              leaderless_ms: int = 0) -> int | None:
    """The node that should stand for leadership of ``state``'s partition now, or None (it has a
    leader, or no eligible replica is alive). ``ranks``: each node's rank under the topic's
    ``leader_racks`` (lower first; a node not in it ranks with 0).

    ``leaderless_ms``: how long the partition has been seen without a leader. A candidate that
    has not taken it within ``ELECTION_GRACE_MS`` is passed over for the next live eligible
    replica, and so on each grace period (wrapping round): a candidate whose lease still holds but
    who cannot act (paused, cut off from etcd) would otherwise leave the partition leaderless
    until its lease lapsed. Every eligible replica holds what was acknowledged (one that restarted
    uncleanly leaves the ISR before it may stand, decision 0385), so any may lead."""
    if state.leader != NO_LEADER:
        return None
    standing = eligible_alive(state, alive, ranks)
    if not standing:
        return None
    return standing[(max(0, leaderless_ms) // ELECTION_GRACE_MS) % len(standing)]


def eligible_alive(state: PartitionState, alive: Collection[int], ranks: Mapping[int, int] | None = None) -> list[int]:
    """The live replicas that may stand, best first: the ISR's, else (none alive) the ELR's."""
    for eligible in (state.isr, state.elr):
        standing = sorted((rank_of(ranks, node), position, node) for position, node in enumerate(state.replicas)
                          if node in eligible and node in alive)
        if standing:
            return [node for _, _, node in standing]
    return []


def should_stand(state: PartitionState, node_id: int, alive: Collection[int],
                 ranks: Mapping[int, int] | None = None, leaderless_ms: int = 0) -> bool:
    return candidate(state, alive, ranks, leaderless_ms) == node_id


def topic_ranks(config: Mapping[str, object], racks: Mapping[int, str | None]) -> dict[int, int] | None:
    """Each node's rank under a topic's ``leader_racks`` (``racks``: the nodes' racks), or None
    when the topic has no preference."""
    preference = leader_racks(config)
    return node_ranks(racks, preference) if preference else None


def rank_of(ranks: Mapping[int, int] | None, node: int) -> int:
    return 0 if ranks is None else ranks.get(node, 0)
