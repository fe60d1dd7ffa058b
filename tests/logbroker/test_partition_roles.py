"""Who hosts a partition and who stands for its leadership: pure rules, checked exhaustively over
small states (hypothesis) — exactly one candidate when an in-sync replica is alive, never a node
outside the ISR, the preferred replica first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.models import PartitionState
from logbroker.partition_roles import ELECTION_GRACE_MS, NO_LEADER, candidate, hosts, should_stand

NODES = range(1, 6)


@st.composite
def states(draw: st.DrawFn) -> PartitionState:
    replicas = tuple(draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True)))
    isr = tuple(n for n in replicas if draw(st.booleans()))
    elr = tuple(n for n in replicas if n not in isr and draw(st.booleans()))
    leader = draw(st.sampled_from((NO_LEADER, *replicas)))
    return PartitionState("t", 0, replicas, isr, leader, draw(st.integers(0, 9)), elr)


def test_the_preferred_replica_stands_when_alive_and_in_sync():
    state = PartitionState("t", 0, (2, 1, 3), (2, 1, 3), NO_LEADER, 4)
    assert candidate(state, {1, 2, 3}) == 2
    assert should_stand(state, 2, {1, 2, 3}) and not should_stand(state, 1, {1, 2, 3})


def test_the_next_in_sync_replica_stands_when_the_preferred_one_is_dead():
    state = PartitionState("t", 0, (2, 1, 3), (2, 3), NO_LEADER, 4)
    assert candidate(state, {1, 3}) == 3  # 1 is alive but not in sync: no unclean election


def test_nobody_stands_with_a_leader_or_without_a_live_in_sync_replica():
    assert candidate(PartitionState("t", 0, (1, 2), (1, 2), 1, 1), {1, 2}) is None
    assert candidate(PartitionState("t", 0, (1, 2), (1,), NO_LEADER, 1), {2}) is None


def test_an_eligible_leader_replica_stands_only_when_no_member_of_the_isr_is_alive():
    state = PartitionState("t", 0, (1, 2, 3), (1,), NO_LEADER, 4, (3, 2))
    assert candidate(state, {1, 2, 3}) == 1
    assert candidate(state, {2, 3}) == 2, "the ELR in replica order"
    assert candidate(state, {3}) == 3
    assert candidate(PartitionState("t", 0, (1, 2, 3), (1,), NO_LEADER, 4), {2, 3}) is None


@given(states(), st.sets(st.sampled_from(NODES)))
def test_at_most_one_node_stands_and_only_from_the_live_isr_else_the_live_elr(state: PartitionState,
                                                                               alive: set[int]):
    standing = [n for n in NODES if should_stand(state, n, alive)]
    assert len(standing) <= 1
    live_isr = [n for n in state.replicas if n in state.isr and n in alive]
    live_elr = [n for n in state.replicas if n in state.elr and n in alive]
    for node in standing:
        assert node in alive and hosts(state, node) and state.leader == NO_LEADER
        assert node in state.isr or (node in state.elr and not live_isr)
    if state.leader == NO_LEADER and (live_isr or live_elr):
        assert standing == [(live_isr or live_elr)[0]]


@given(states())
def test_a_node_hosts_exactly_the_partitions_naming_it(state: PartitionState):
    assert [n for n in NODES if hosts(state, n)] == sorted(state.replicas)


def test_a_candidate_that_lets_the_grace_period_pass_is_passed_over_in_turn():
    state = PartitionState("t", 0, (1, 2, 3), (1, 2, 3), NO_LEADER, 4)
    grace = ELECTION_GRACE_MS
    assert [candidate(state, {1, 2, 3}, leaderless_ms=ms) for ms in (0, grace - 1, grace, 2 * grace, 3 * grace)] \
        == [1, 1, 2, 3, 1]
    assert [candidate(state, {1, 3}, leaderless_ms=ms) for ms in (0, grace, 2 * grace)] == [1, 3, 1]
    eligible = PartitionState("t", 0, (1, 2, 3), (1,), NO_LEADER, 4, (2, 3))
    assert [candidate(eligible, {2, 3}, leaderless_ms=ms) for ms in (0, grace)] == [2, 3], "the ELR in turn"


@given(states(), st.sets(st.sampled_from(NODES)), st.integers(0, 10 * ELECTION_GRACE_MS))
def test_whoever_stands_after_a_wait_is_a_live_eligible_replica(state: PartitionState, alive: set[int],
                                                                leaderless_ms: int):
    standing = [n for n in NODES if should_stand(state, n, alive, leaderless_ms=leaderless_ms)]
    assert len(standing) <= 1
    live_isr = [n for n in state.replicas if n in state.isr and n in alive]
    for node in standing:
        assert node in alive and (node in state.isr or (node in state.elr and not live_isr))
    assert bool(standing) == (candidate(state, alive) is not None)
