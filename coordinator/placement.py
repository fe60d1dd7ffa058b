"""Where partitions live: pure functions over replica lists and node lists (no I/O, no clock).

An ``Assignment`` maps ``(topic, partition)`` to its replica list, preferred leader first (DESIGN
§5, ``partitions/<topic>/<p>``). Loads are counted over the whole cluster (every topic), per live
node: *leaders* (partitions it is ``replicas[0]`` of) and *replicas*. Every function is
deterministic: partitions are visited in sorted order and ties go to the lower node id.

Invariants every result keeps:

- a partition's replicas are distinct live nodes, and its replication factor never changes;
- racks: a node's rack is its failure domain (a node without a rack is a domain of its own). A new
  or moved replica goes to a rack the partition uses least, so a partition's replicas are in
  distinct racks whenever there are at least replication-factor racks, else spread over racks as
  evenly as they allow (Kafka's rack-aware assignment alternates racks the same way); a move never
  makes a partition's rack spread worse.

Balance ("spread" = max minus min over live nodes):

- ``place_partitions`` makes a node with fewest leaders each new partition's preferred leader, so
  a leader spread of at most 1 stays at most 1. Followers go to nodes with fewest replicas (ties:
  nodes leading most, as the next leaders go to the others); from an empty cluster without racks
  and one replication factor, the replica spread stays at most 1 (tested, not proven; mixed
  factors reach 2).
- ``rebalance`` (1) replaces each replica on a node that is gone, in place; (2) moves one replica
  at a time from a node to one holding at least 2 fewer, racks allowing; (3) while a node leads at
  least 2 more than another, hands leadership along a chain of partitions (a reorder, no data
  moves), else moves a led partition to the other node, with one follower moved back when needed
  to keep replica counts. Without racks both spreads end at most 1 (some move always exists);
  when nodes were only added, the replicas moved are at most the sum over nodes of their count
  above floor(total / nodes) (tested, not proven). An assignment on live nodes whose spreads are
  at most 1 needs no change; with racks, a rebalance of a rebalance returning nothing is tested.
- ``decommission`` is a rebalance without the leaving node.

A topic's ``leader_racks`` (``coordinator.leader_racks``) ranks the nodes: ``place_partitions``
takes each preferred leader from the best-ranked rack among those it may use, and ``rebalance``
first gives each such partition the best-ranked preferred leader it can have, then balances only
by moves that keep every preferred leader's rank (so the balance bounds above hold among equally
ranked nodes), repeating its balancing rounds until one changes nothing.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from coordinator.errors import InvalidTopicError
from coordinator.leader_racks import rack_rank

Key = tuple[str, int]
# Balancing rounds under ``leader_racks``: a leader move can unblock a replica move that a rank
# limit blocked in the round before; rounds repeat until one changes nothing (bound: a bug guard).
BALANCING_ROUNDS_MAX: Final = 16
Assignment = Mapping[Key, tuple[int, ...]]
Moves = dict[Key, tuple[int, ...]]
_Domain = tuple[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementNode:
    node_id: int
    rack: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class NodeLoad:
    """What one node carries: partitions it is preferred leader of, and replicas it holds."""

    leaders: int
    replicas: int


def node_loads(assignment: Assignment, nodes: Iterable[int] = ()) -> dict[int, NodeLoad]:
    """Per node id, its preferred leaders and replicas in ``assignment``; ``nodes`` are listed
    even when they carry nothing (a node just added)."""
    leaders = Counter(replicas[0] for replicas in assignment.values() if replicas)
    held = Counter(node for replicas in assignment.values() for node in replicas)
    ids = sorted(set(nodes) | set(held))
    return {node: NodeLoad(leaders[node], held[node]) for node in ids}


def spread(loads: Mapping[int, NodeLoad]) -> NodeLoad:
    """Max minus min over nodes, of leaders and of replicas: 0 or 1 is as even as it gets."""
    if not loads:
        return NodeLoad(0, 0)
    leaders = [load.leaders for load in loads.values()]
    replicas = [load.replicas for load in loads.values()]
    return NodeLoad(max(leaders) - min(leaders), max(replicas) - min(replicas))


@dataclasses.dataclass(slots=True)
class _Loads:
    """Leader and replica counts of the live nodes while a placement is being built."""

    domain: dict[int, _Domain]
    leaders: dict[int, int]
    replicas: dict[int, int]

    @classmethod
    def of(cls, nodes: Sequence[PlacementNode]) -> _Loads:
        ids = [node.node_id for node in nodes]
        assert len(set(ids)) == len(ids), f"duplicate node ids in {ids}"
        domain = {n.node_id: ("rack", n.rack) if n.rack is not None else ("node", str(n.node_id)) for n in nodes}
        return cls(domain, dict.fromkeys(sorted(ids), 0), dict.fromkeys(sorted(ids), 0))

    def count(self, replicas: Sequence[int], sign: int = 1) -> None:
        """Add (or with ``sign=-1`` take away) one partition's replicas on live nodes."""
        if replicas and replicas[0] in self.leaders:
            self.leaders[replicas[0]] += sign
        for node in replicas:
            if node in self.replicas:
                self.replicas[node] += sign

    def ranks(self, leader_racks: Sequence[str]) -> dict[int, int]:
        """Each live node's rank under a topic's ``leader_racks`` (all 0 without one)."""
        return {node: rack_rank(rack if kind == "rack" else None, leader_racks)
                for node, (kind, rack) in self.domain.items()}

    def choose(self, partition: Sequence[int], *, leader: bool, ranks: Mapping[int, int] | None = None) -> int:
        """The live node for one more replica of ``partition`` (its live replicas so far): a node
        not in it, in a rack it uses least, with fewest leaders (``leader``) or replicas. With
        ``ranks`` (a topic's ``leader_racks``), the best-ranked of the racks used least wins, for a
        leader (a new partition's first replica: the first listed rack with a live node) and for
        a follower (a second replica in a preferred rack is a local leader after a failover)."""
        used = Counter(self.domain[node] for node in partition)
        free = [node for node in self.replicas if node not in partition]
        assert free, f"no live node left for a partition on {list(partition)}"
        rank = ranks or {}
        least = min(used[self.domain[node]] for node in free)
        fitting = [node for node in free if used[self.domain[node]] == least]
        if leader:
            return min(fitting, key=lambda node: (rank.get(node, 0), self.leaders[node], self.replicas[node], node))
        # A follower avoids nodes leading few partitions: the next preferred leaders go there.
        return min(fitting, key=lambda node: (rank.get(node, 0), self.replicas[node], -self.leaders[node], node))


def _check_factor(replication_factor: int, live: int, what: str) -> None:
    if replication_factor < 1:
        raise InvalidTopicError(f"{what}: replication factor {replication_factor} is below 1")
    if replication_factor > live:
        raise InvalidTopicError(f"{what}: replication factor {replication_factor} exceeds the {live} live node(s)")


def place_partitions(partitions: int, replication_factor: int, nodes: Sequence[PlacementNode], *,
                     first_partition: int = 0, current: Assignment | None = None,
                     leader_racks: Sequence[str] = ()) -> list[tuple[int, ...]]:
    """Replica lists (preferred leader first) for partitions ``first_partition`` ..
    ``first_partition + partitions - 1`` over ``nodes`` (the live ones). ``current`` is the
    cluster's existing assignment (every topic, including earlier partitions of this one): new
    partitions go where it has fewest leaders and replicas, so pass it when growing a topic.
    ``leader_racks`` (the topic's config): each preferred leader is in the first listed rack that
    has a live node; the followers still spread over racks as without it.
    ``InvalidTopicError`` when ``replication_factor`` is below 1 or above the live node count."""
    _check_factor(replication_factor, len(nodes), f"new partitions from {first_partition}")
    if partitions < 0:
        raise InvalidTopicError(f"partition count {partitions} is negative")
    loads = _Loads.of(nodes)
    for held in (current or {}).values():
        loads.count(held)
    ranks = loads.ranks(leader_racks)
    placed = []
    for _ in range(partitions):
        replicas: list[int] = []
        for position in range(replication_factor):
            replicas.append(loads.choose(replicas, leader=position == 0, ranks=ranks))
        loads.count(replicas)
        placed.append(tuple(replicas))
    return placed


def rebalance(current: Assignment, nodes: Sequence[PlacementNode],
              leader_racks: Mapping[str, Sequence[str]] | None = None) -> Moves:
    """The partitions whose replica list must change, with their new lists, so that nothing is on
    a node missing from ``nodes`` and loads are even (see the module docstring); partitions left
    as they are are not returned. A replica replaced keeps its position, so a partition changes
    as little as it can. ``leader_racks`` (per topic): first each such partition's preferred
    leader is put in the best-ranked rack it can have (a reorder when a replica is there already,
    else a move of the leader's replica there, racks allowing), and no later step makes its rank
    change, so balance is sought only among equally ranked choices. ``InvalidTopicError`` when a
    partition has more replicas than there are nodes."""
    for (topic, partition), replicas in current.items():
        _check_factor(len(replicas), len(nodes), f"partition {topic}/{partition}")
    work = _Work(current, _Loads.of(nodes), leader_racks or {})
    work.evacuate()
    work.prefer_racks()
    for _ in range(BALANCING_ROUNDS_MAX):
        before = {key: tuple(replicas) for key, replicas in work.replicas.items()}
        _even_replicas(work)
        _even_leaders(work)
        if not work.ranks or before == {key: tuple(replicas) for key, replicas in work.replicas.items()}:
            break  # without ranks one round settles (see the module docstring)
    return {key: tuple(replicas) for key, replicas in work.replicas.items() if tuple(replicas) != tuple(current[key])}


def decommission(current: Assignment, nodes: Sequence[PlacementNode], leaving: int,
                 leader_racks: Mapping[str, Sequence[str]] | None = None) -> Moves:
    """The moves that take every replica off node ``leaving`` onto the other ``nodes``, evenly:
    a rebalance over the nodes that remain. ``InvalidTopicError`` when a partition has more
    replicas than nodes would remain."""
    return rebalance(current, [node for node in nodes if node.node_id != leaving], leader_racks)


class _Work:
    """An assignment being rebalanced: its replica lists, the loads they make, and per live node
    the partitions on it (in a fixed order), so a search scans only one node's partitions."""

    def __init__(self, current: Assignment, loads: _Loads, leader_racks: Mapping[str, Sequence[str]]) -> None:
        self.loads = loads
        self.replicas = {key: list(current[key]) for key in sorted(current)}
        # Per topic with ``leader_racks``, each live node's rank (a node not live ranks last).
        self.ranks = {topic: loads.ranks(racks) for topic, racks in leader_racks.items() if racks}
        self.on: dict[int, dict[Key, None]] = {node: {} for node in loads.replicas}
        for key, replicas in self.replicas.items():
            loads.count(replicas)
            for node in replicas:
                if node in self.on:
                    self.on[node][key] = None

    def evacuate(self) -> None:
        """Replace, in place, each replica on a node that is not live."""
        for key, replicas in self.replicas.items():
            for position, node in enumerate(replicas):
                if node not in self.on:
                    live = [other for other in replicas if other in self.on]
                    self.replace(key, position, self.loads.choose(live, leader=position == 0,
                                                                  ranks=self.ranks.get(key[0])))

    def rank(self, key: Key, node: int) -> int:
        """``node``'s rank for partition ``key``'s topic (0 for all when it has no leader racks)."""
        ranks = self.ranks.get(key[0])
        return 0 if ranks is None else ranks.get(node, len(ranks) + 1)

    def prefer_racks(self) -> None:
        """Give each partition of a topic with ``leader_racks`` the best-ranked preferred leader
        it can have: its best-ranked replica becomes preferred (a reorder); then, if a live node
        ranks better still, the leader's replica moves to such a node where racks allow."""
        for key, replicas in self.replicas.items():
            if key[0] not in self.ranks:
                continue
            best = min(range(len(replicas)), key=lambda position: (self.rank(key, replicas[position]), position))
            if self.rank(key, replicas[best]) < self.rank(key, replicas[0]):
                self.hand_over(key, best)
            ranks = self.ranks[key[0]]
            top = min(ranks.values())
            fitting = [node for node in ranks
                       if ranks[node] == top and self.fits(key, replicas[0], node, keep_ranks=False)]
            if fitting and top < self.rank(key, replicas[0]):
                loads = self.loads
                self.replace(key, 0, min(fitting, key=lambda n: (loads.leaders[n], loads.replicas[n], n)))

    def replace(self, key: Key, position: int, node: int) -> None:
        replicas = self.replicas[key]
        self.loads.count(replicas, -1)
        self.on.get(replicas[position], {}).pop(key, None)
        replicas[position] = node
        self.loads.count(replicas)
        self.on[node][key] = None

    def hand_over(self, key: Key, position: int) -> None:
        """Make the replica at ``position`` the preferred leader (it swaps places with the old)."""
        replicas = self.replicas[key]
        self.loads.leaders[replicas[0]] -= 1
        replicas[0], replicas[position] = replicas[position], replicas[0]
        self.loads.leaders[replicas[0]] += 1

    def fits(self, key: Key, donor: int, receiver: int, *, keep_ranks: bool = True) -> bool:
        """Whether ``receiver`` may replace ``donor`` in partition ``key``: it is not there yet and
        the partition's rack spread gets no worse (the receiver's rack is used no more than the
        donor's by the other replicas), and under ``leader_racks`` a preferred leader is replaced
        by one of the same rank and no follower outranks the preferred leader."""
        replicas = self.replicas[key]
        if receiver in replicas:
            return False
        if keep_ranks and key[0] in self.ranks:  # balancing keeps the ranks ``prefer_racks`` gave the partition
            if replicas[0] == donor and self.rank(key, receiver) != self.rank(key, donor):
                return False
            if replicas[0] != donor and self.rank(key, receiver) < self.rank(key, replicas[0]):
                return False
        others = [self.loads.domain[node] for node in replicas if node != donor]
        return others.count(self.loads.domain[receiver]) <= others.count(self.loads.domain[donor])


def _even_replicas(work: _Work) -> None:
    """Move one replica at a time from a fuller node to one with at least 2 fewer. Each move
    lowers the sum of squared replica counts, so the loop ends; the bound only guards a bug.
    A (donor, receiver) pair found stuck (no partition on the donor fits the receiver) is skipped
    until a move makes one fit."""
    stuck: set[tuple[int, int]] = set()
    moves_max = sum(work.loads.replicas.values()) ** 2 + 1
    for _ in range(moves_max):
        move = _find_replica_move(work, stuck)
        if move is None:
            return
        key, position, receiver = move
        work.replace(key, position, receiver)
        # Only partition ``key`` changed, so only it can unstick a pair.
        stuck = {(donor, to) for donor, to in stuck if donor not in work.replicas[key] or not work.fits(key, donor, to)}
    raise AssertionError("replica balancing did not settle")


def _find_replica_move(work: _Work, stuck: set[tuple[int, int]]) -> tuple[Key, int, int] | None:
    """The first allowed move from the fullest donor to the emptiest receiver that differ by 2
    (ties: the donor leading most, the receiver leading least)."""
    loads = work.loads
    order = sorted(loads.replicas, key=lambda node: (loads.replicas[node], loads.leaders[node], node))
    for donor in reversed(order):
        for receiver in order:
            if loads.replicas[donor] - loads.replicas[receiver] < 2:
                break
            if (donor, receiver) in stuck:
                continue
            move = _movable(work, donor, receiver)
            if move is not None:
                return move[0], move[1], receiver
            stuck.add((donor, receiver))
    return None


def _movable(work: _Work, donor: int, receiver: int) -> tuple[Key, int] | None:
    """A partition (and position) on ``donor`` that ``receiver`` fits. The donor's preferred
    leadership goes with it when the donor leads at least 2 more than the receiver, else a
    follower replica is taken first."""
    want_leader = work.loads.leaders[donor] - work.loads.leaders[receiver] >= 2
    fallback = None
    for key in work.on[donor]:
        if not work.fits(key, donor, receiver):
            continue
        position = work.replicas[key].index(donor)
        if (position == 0) == want_leader:
            return key, position
        if fallback is None:
            fallback = (key, position)
    return fallback


def _even_leaders(work: _Work) -> None:
    """While a node u leads at least 2 more partitions than a node v: hand leadership along a
    chain u → … → v (each step a partition led by one node and held by the next), which only
    reorders replica lists; failing that, move a partition u leads to v, and unless v holds
    fewer replicas than u, move one of v's follower replicas back to u so replica counts stay
    as they were. Each step lowers the sum of squared leader counts and lifts no replica count
    above the larger of the two, so the loop ends; the bound only guards a bug."""
    steps_max = sum(work.loads.leaders.values()) ** 2 + 1
    for _ in range(steps_max):
        chain = _find_leader_chain(work)
        if chain is not None:
            for key, position in chain:
                work.hand_over(key, position)
            continue
        moves = _find_leader_moves(work)
        if not moves:
            return
        for key, position, receiver in moves:
            work.replace(key, position, receiver)
    raise AssertionError("leader balancing did not settle")


def _find_leader_moves(work: _Work) -> list[tuple[Key, int, int]]:
    """(partition, position, new node) moves that take one leadership from a node leading most
    to one leading at least 2 fewer (see ``_even_leaders``); empty when racks allow none."""
    loads = work.loads
    order = sorted(loads.leaders, key=lambda node: (loads.leaders[node], loads.replicas[node], node))
    for donor in reversed(order):
        for receiver in order:
            if loads.leaders[donor] - loads.leaders[receiver] < 2:
                break
            led = _takeable(work, donor, receiver, leader=True)
            if led is None:
                continue
            if loads.replicas[receiver] < loads.replicas[donor]:
                return [(led, 0, receiver)]
            back = _takeable(work, receiver, donor, leader=False)
            if back is not None:  # never ``led``: the receiver is not in it yet
                return [(led, 0, receiver), (back, work.replicas[back].index(receiver), donor)]
    return []


def _takeable(work: _Work, donor: int, receiver: int, *, leader: bool) -> Key | None:
    """The first partition that ``donor`` leads (or follows in) and ``receiver`` fits."""
    for key in work.on[donor]:
        if (work.replicas[key][0] == donor) == leader and work.fits(key, donor, receiver):
            return key
    return None


_Step = tuple[int, Key, int]  # (node handing over, partition, position of the next holder)


def _find_leader_chain(work: _Work) -> list[tuple[Key, int]] | None:
    """(partition, position of the new leader) along a shortest chain from a node leading most
    to one leading at least 2 fewer; None when there is none."""
    leaders = work.loads.leaders
    led_by: dict[int, list[Key]] = {node: [] for node in leaders}
    for key, replicas in work.replicas.items():
        led_by[replicas[0]].append(key)
    for source in sorted(leaders, key=lambda node: (-leaders[node], node)):
        reached: dict[int, _Step | None] = {source: None}
        queue = deque([source])
        while queue:
            node = queue.popleft()
            if leaders[node] <= leaders[source] - 2:
                chain = []
                step = reached[node]
                while step is not None:
                    chain.append((step[1], step[2]))
                    step = reached[step[0]]
                return chain[::-1]
            for key in led_by[node]:
                for position, holder in enumerate(work.replicas[key][1:], start=1):
                    if holder not in reached and work.rank(key, holder) == work.rank(key, node):
                        reached[holder] = (node, key, position)
                        queue.append(holder)
    return None
