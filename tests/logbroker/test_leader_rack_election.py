"""Election and failback under ``leader_racks``: the candidate is the best-ranked live in-sync
replica (replica order between equals), failback hands leadership to the one the election then
picks and never back and forth, and without ranks both rules are what they were."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.models import PartitionState
from logbroker.partition_roles import NO_LEADER, candidate, topic_ranks
from logbroker.partition_state import failback_target, preferred_ready

NODES = range(1, 6)


@st.composite
def situations(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int, set[int], dict[int, int]]:
    """(replicas, isr, leader, alive, ranks) with the leader alive and in the ISR."""
    replicas = tuple(draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True)))
    leader = draw(st.sampled_from(replicas))
    isr = tuple(n for n in replicas if n == leader or draw(st.booleans()))
    alive = {n for n in NODES if n == leader or draw(st.booleans())}
    ranks = {n: draw(st.integers(0, 2)) for n in NODES}
    return replicas, isr, leader, alive, ranks


def test_a_leaderless_partition_elects_in_the_first_listed_rack() -> None:
    ranks = topic_ranks({"leader_racks": ["b", "a"]}, {1: "a", 2: "b", 3: "c", 4: "b"})
    assert ranks == {1: 1, 2: 0, 3: 2, 4: 0}
    state = PartitionState("t", 0, (2, 1, 3, 4), (1, 3, 4), NO_LEADER, 4)
    assert candidate(state, {1, 3, 4}, ranks) == 4, "node 2 is dead: the other rack-b replica"
    assert candidate(state, {1, 3}, ranks) == 1, "no rack-b replica: the next listed rack"
    assert candidate(state, {3}, ranks) == 3
    assert topic_ranks({}, {1: "a"}) is None


def test_failback_returns_leadership_to_the_listed_rack() -> None:
    ranks = {1: 0, 2: 1, 3: 1}
    assert failback_target((1, 2, 3), (1, 2, 3), 2, {1, 2, 3}, ranks) == 1
    assert failback_target((1, 2, 3), (2, 3), 2, {1, 2, 3}, ranks) is None, "not in sync yet"
    assert failback_target((2, 1, 3), (1, 2, 3), 2, {1, 2, 3}, ranks) == 1, "a live config change"
    assert failback_target((2, 1, 3), (1, 2, 3), 1, {1, 2, 3}, ranks) is None, "not back to a worse rack"


@given(situations())
def test_failback_picks_what_the_election_picks_and_then_rests(
        situation: tuple[tuple[int, ...], tuple[int, ...], int, set[int], dict[int, int]]) -> None:
    replicas, isr, leader, alive, ranks = situation
    assert (failback_target(replicas, isr, leader, alive) is not None) == preferred_ready(replicas, isr, leader, alive)
    assert failback_target(replicas, isr, leader, alive) in (None, replicas[0])
    target = failback_target(replicas, isr, leader, alive, ranks)
    if target is None:
        return
    assert target != leader and target in isr and target in alive and ranks[target] <= ranks[leader]
    resigned = PartitionState("t", 0, replicas, isr, NO_LEADER, 1)
    assert candidate(resigned, alive, ranks) == target, "the resignation elects the target"
    assert failback_target(replicas, isr, target, alive, ranks) is None, "no hand-back from there"


@given(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True), st.data())
def test_the_candidate_is_the_best_ranked_live_in_sync_replica(replicas: list[int], data: st.DataObject) -> None:
    isr = tuple(n for n in replicas if data.draw(st.booleans()))
    alive = data.draw(st.sets(st.sampled_from(NODES)))
    ranks = {n: data.draw(st.integers(0, 2)) for n in NODES}
    state = PartitionState("t", 0, tuple(replicas), isr, NO_LEADER, 1)
    chosen = candidate(state, alive, ranks)
    live_isr = [n for n in replicas if n in isr and n in alive]
    if not live_isr:
        assert chosen is None
        return
    assert chosen in live_isr and ranks[chosen] == min(ranks[n] for n in live_isr)
    assert candidate(state, alive) == live_isr[0], "without ranks: replica order"
