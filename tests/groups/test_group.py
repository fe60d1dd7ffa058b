"""The pure group state: generations, fencing, session expiry, partition changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import InconsistentStrategyError, NotAssignedError, StaleGenerationError, UnknownMemberError
from logbroker.groups.group import Group

COUNTS = {"t": 6}


def test_join_starts_a_generation_and_splits_partitions():
    group = Group("g")
    members = [group.join(["t"], 1000, "range", COUNTS, now_ms=0) for _ in range(3)]
    assert group.generation == 3
    assert sorted(p for m in members for p in group.assignment[m.member_id]["t"]) == list(range(6))
    assert all(len(group.assignment[m.member_id]["t"]) == 2 for m in members)


def test_rejoin_with_same_subscription_keeps_the_generation():
    group = Group("g")
    member = group.join(["t"], 1000, None, COUNTS, now_ms=0)
    again = group.join(["t"], 1000, None, COUNTS, now_ms=10, member_id=member.member_id)
    assert again.member_id == member.member_id and group.generation == 1


def test_stale_generation_and_unowned_partition_are_fenced():
    group = Group("g")
    first = group.join(["t"], 1000, None, COUNTS, now_ms=0)
    group.check_commit(first.member_id, 1, [("t", 5)])
    second = group.join(["t"], 1000, None, COUNTS, now_ms=0)
    with pytest.raises(StaleGenerationError):
        group.check_commit(first.member_id, 1, [("t", 0)])
    theirs = group.assignment[second.member_id]["t"][0]
    with pytest.raises(NotAssignedError):
        group.check_commit(first.member_id, 2, [("t", theirs)])
    with pytest.raises(UnknownMemberError):
        group.check_commit("nobody", 2, [("t", 0)])


def test_session_timeout_removes_the_member_and_rebalances():
    group = Group("g")
    a = group.join(["t"], 100, None, COUNTS, now_ms=0)
    b = group.join(["t"], 1000, None, COUNTS, now_ms=0)
    group.heartbeat(b.member_id, now_ms=90)
    assert group.expire(99, COUNTS) == []
    assert group.expire(100, COUNTS) == [a.member_id]
    assert group.generation == 3 and group.assignment == {b.member_id: {"t": list(range(6))}}
    with pytest.raises(UnknownMemberError):
        group.heartbeat(a.member_id, now_ms=101)


def test_added_partitions_need_a_rebalance():
    group = Group("g")
    member = group.join(["t"], 1000, None, COUNTS, now_ms=0)
    assert not group.needs_rebalance(COUNTS)
    assert group.needs_rebalance({"t": 8})
    group.rebalance({"t": 8})
    assert group.assignment[member.member_id]["t"] == list(range(8))


def test_later_members_cannot_change_the_strategy():
    group = Group("g")
    group.join(["t"], 1000, "sticky", COUNTS, now_ms=0)
    with pytest.raises(InconsistentStrategyError):
        group.join(["t"], 1000, "range", COUNTS, now_ms=0)
    group.join(["t"], 1000, None, COUNTS, now_ms=0)
    assert group.strategy == "sticky"


@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "expire"]), st.integers(0, 5)), max_size=40),
       st.sampled_from(["range", "round_robin", "sticky"]))
def test_generations_grow_and_partitions_have_one_owner(ops, strategy):
    group = Group("g", strategy=strategy)
    now = 0
    seen = {}
    for op, n in ops:
        now += 50
        before = group.generation
        if op == "join":
            group.join(["t"], 100 + n * 100, None, COUNTS, now_ms=now)
        elif op == "leave" and group.members:
            group.leave(sorted(group.members)[n % len(group.members)], COUNTS)
        else:
            group.expire(now, COUNTS)
        assert group.generation >= before
        owners = [(p, m) for m, a in group.assignment.items() for p in a.get("t", [])]
        assert len({p for p, _ in owners}) == len(owners)
        assert len(owners) == (6 if group.members else 0)
        assert set(group.assignment) == set(group.members)
        assert seen.setdefault(group.generation, sorted(owners)) == sorted(owners)
