"""``kafka_api.group_state``: the classic group protocol's join phases, syncs, heartbeats and
expiry, and how ListGroups and DescribeGroups show a group, by example and against random
schedules (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_api.group_state import (
    DEAD_GROUP,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    NONE,
    REBALANCE_IN_PROGRESS,
    STATE_NAMES,
    UNKNOWN_MEMBER_ID,
    GroupSummary,
    KafkaGroup,
    MemberSummary,
    filter_names,
    listed,
    stored_summary,
)

RANGE = [("range", b"m-range"), ("roundrobin", b"m-rr")]


def join(group: KafkaGroup, member_id: str = "", now: int = 0, protocols=None, session_ms: int = 10_000) -> str:
    member, error = group.join(member_id, None, "alice", "consumer", protocols or RANGE, session_ms, 5_000, now)
    assert error == NONE
    return member


def test_a_lone_member_gets_a_generation_at_once_and_leads_it():
    group = KafkaGroup("g")
    a = join(group)
    assert group.join_ready(0)
    (answer,) = group.complete_join()
    assert (answer.member_id, answer.generation, answer.leader, answer.protocol_name) == (a, 1, a, "range")
    assert answer.members == ((a, None, b"m-range"),)


def test_a_second_member_starts_a_phase_the_first_learns_of_from_its_heartbeat():
    group = KafkaGroup("g")
    a = join(group)
    group.complete_join()
    assert group.sync(a, 1, [(a, b"all")], 0) == NONE and group.assignment_of(a) == b"all"
    b = join(group, now=10)
    assert not group.join_ready(10)
    assert group.heartbeat(a, 1, 20) == REBALANCE_IN_PROGRESS
    join(group, a, now=30)
    assert group.join_ready(30)
    answers = {x.member_id: x for x in group.complete_join()}
    assert {x.generation for x in answers.values()} == {2} and {x.leader for x in answers.values()} == {a}
    assert len(answers[a].members) == 2 and answers[b].members == ()
    assert group.sync(b, 2, [], 40) == NONE and group.assignment_of(b) is None  # waits for the leader
    assert group.sync(a, 2, [(a, b"p0"), (b, b"p1")], 41) == NONE
    assert (group.assignment_of(a), group.assignment_of(b)) == (b"p0", b"p1")
    assert group.heartbeat(b, 1, 50) == ILLEGAL_GENERATION
    assert group.heartbeat("nobody", 2, 50) == UNKNOWN_MEMBER_ID
    assert group.heartbeat(b, 2, 50) == NONE


def test_a_member_that_does_not_rejoin_in_time_is_dropped():
    group = KafkaGroup("g")
    a = join(group)
    group.complete_join()
    join(group, now=100)
    assert not group.join_ready(5_099) and group.join_ready(5_100)
    answers = group.complete_join()
    assert a not in group.members and [x.generation for x in answers] == [2]


def test_a_lapsed_session_leaves_and_the_group_rebalances():
    group = KafkaGroup("g")
    a = join(group, session_ms=1_000)
    group.complete_join()
    b = join(group, now=0, session_ms=60_000)
    join(group, a, now=0, session_ms=1_000)
    group.complete_join()
    group.sync(a, 2, [(a, b"x"), (b, b"y")], 0)
    assert group.expire(999) == []
    assert group.expire(1_000) == [a]
    assert group.state == "preparing" and group.heartbeat(b, 2, 1_000) == REBALANCE_IN_PROGRESS


def test_protocols_must_have_one_in_common():
    group = KafkaGroup("g")
    join(group, protocols=[("range", b"")])
    _, error = group.join("", None, "bob", "consumer", [("sticky", b"")], 10_000, 5_000, 0)
    assert error == INCONSISTENT_GROUP_PROTOCOL
    join(group, protocols=[("sticky", b""), ("range", b"")])


def test_the_protocol_most_members_prefer_wins():
    group = KafkaGroup("g")
    a = join(group, protocols=[("range", b""), ("sticky", b"")])
    join(group, protocols=[("sticky", b""), ("range", b"")])
    join(group, protocols=[("sticky", b""), ("range", b"")])
    join(group, a, protocols=[("range", b""), ("sticky", b"")])
    assert {x.protocol_name for x in group.complete_join()} == {"sticky"}


ACTIONS = st.lists(st.tuples(st.sampled_from(["join", "rejoin", "leave", "heartbeat", "sync", "tick"]),
                             st.integers(0, 4), st.integers(0, 3_000)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ACTIONS)
def test_random_schedules_keep_the_invariants(actions):
    group = KafkaGroup("g")
    now = 0
    last_generation = 0
    for action, who, step in actions:
        now += step
        ids = list(group.members)
        target = ids[who % len(ids)] if ids else ""
        if action == "join":
            group.join("", None, "u", "consumer", RANGE, 2_000, 1_000, now)
        elif action == "rejoin" and target:
            group.join(target, None, "u", "consumer", RANGE, 2_000, 1_000, now)
        elif action == "leave" and target:
            group.leave(target, now)
        elif action == "heartbeat" and target:
            group.heartbeat(target, group.generation, now)
        elif action == "sync" and target:
            group.sync(target, group.generation, [(m, m.encode()) for m in group.members], now)
        else:
            group.expire(now)
        if group.join_ready(now):
            answers = group.complete_join()
            assert len({(x.generation, x.leader, x.protocol_name) for x in answers}) <= 1
            assert all(x.protocol_name in {n for n, _ in group.members[x.member_id].protocols} for x in answers)
            assert [x for x in answers if x.members] == [x for x in answers if x.member_id == group.leader]
        assert group.generation >= last_generation
        last_generation = group.generation
        assert group.state != "empty" or not group.members
        if group.state == "stable":
            assert group.leader in group.members
        summary = group.summary()
        assert summary.state == STATE_NAMES[group.state]
        assert [m.member_id for m in summary.members] == list(group.members)
        if group.state != "stable":
            assert summary.protocol_name == "" and all(m.metadata == m.assignment == b"" for m in summary.members)


def test_a_commit_of_the_current_generation_stands_while_members_rejoin_not_before_the_assignment():
    group = KafkaGroup("g")
    a = join(group)
    group.complete_join()
    group.sync(a, 1, [(a, b"x")], 0)
    assert group.check_commit(a, 1) == NONE
    join(group, now=10)  # a second member: a join phase begins
    assert group.check_commit(a, 1) == NONE, "a member commits what it read before it rejoins"
    assert group.check_commit(a, 0) == ILLEGAL_GENERATION
    join(group, a, now=20)
    group.complete_join()
    assert group.check_commit(a, 2) == REBALANCE_IN_PROGRESS, "not until the leader's assignment"
    assert group.check_commit("nobody", 2) == UNKNOWN_MEMBER_ID


def test_a_join_phase_ends_by_the_capped_rebalance_timeout():
    group = KafkaGroup("g")
    a, _ = group.join("", None, "u", "consumer", RANGE, 10_000, 10**9, 0)
    group.complete_join()
    group.join("", None, "u", "consumer", RANGE, 10_000, 10**9, 0)
    assert not group.join_ready(299_999) and group.join_ready(300_000)
    assert a not in {x.member_id for x in group.complete_join()}


# ---- ListGroups and DescribeGroups ---------------------------------------------------------------

def test_a_group_shows_its_protocol_metadata_and_assignments_only_once_stable():
    group = KafkaGroup("g")
    a, _ = group.join("", "static-a", "alice", "consumer", RANGE, 10_000, 5_000, 0,
                      client_id="rdkafka", client_host="/10.0.0.1")
    assert group.summary() == GroupSummary("PreparingRebalance", "consumer", "", (
        MemberSummary(a, "static-a", "alice", "rdkafka", "/10.0.0.1", b"", b""),))
    group.complete_join()
    assert group.summary().state == "CompletingRebalance" and group.summary().members[0].metadata == b""
    group.sync(a, 1, [(a, b"assigned")], 0)
    assert group.summary() == GroupSummary("Stable", "consumer", "range", (
        MemberSummary(a, "static-a", "alice", "rdkafka", "/10.0.0.1", b"m-range", b"assigned"),))
    group.leave(a, 1)
    assert group.summary() == GroupSummary("Empty", "consumer", "", ())


def test_a_rejoin_updates_what_the_member_shows():
    group = KafkaGroup("g")
    a, _ = group.join("", None, "alice", "consumer", RANGE, 10_000, 5_000, 0, client_host="/10.0.0.1")
    group.join(a, None, "alice", "consumer", RANGE, 10_000, 5_000, 1, client_id="again", client_host="/10.0.0.2")
    (member,) = group.summary().members
    assert (member.client_id, member.client_host, member.instance_id) == ("again", "/10.0.0.2", None)


def test_a_group_the_broker_keeps_without_kafka_members_is_empty_or_stable_and_unknown_is_dead():
    assert stored_summary(False) == GroupSummary("Empty")
    assert stored_summary(True) == GroupSummary("Stable"), "HTTP members: not to be reset as an idle group"
    assert GroupSummary("Dead", "", "", ()) == DEAD_GROUP


def test_list_filters_match_states_and_the_classic_type_without_case():
    stable, empty = GroupSummary("Stable", "consumer"), GroupSummary("Empty")

    def kept(summary: GroupSummary, states: list[str], types: list[str]) -> bool:
        return listed(summary, filter_names(states), filter_names(types))

    assert kept(stable, [], []) and kept(empty, [], [])
    assert kept(stable, ["Stable"], []) and kept(stable, ["stable", "Empty"], [])
    assert not kept(empty, ["Stable", "PreparingRebalance"], [])
    assert kept(stable, [], ["Classic"]) and kept(stable, [], ["consumer", "classic"])
    assert not kept(stable, [], ["Consumer"]) and not kept(stable, ["Stable"], ["share"])


def test_a_consumer_assignment_is_read_within_its_bytes() -> None:
    import struct

    from kafka_api.group_state import consumer_assignment

    def assignment(topics: dict[str, list[int]], user_data: bytes = b"") -> bytes:
        out = struct.pack(">hi", 1, len(topics))
        for topic, partitions in topics.items():
            out += struct.pack(">h", len(topic)) + topic.encode()
            out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
        return out + struct.pack(">i", len(user_data)) + user_data

    assert consumer_assignment(assignment({"a": [2, 0], "b": []})) == {"a": [0, 2], "b": []}
    assert consumer_assignment(b"") == {}
    whole = assignment({"a": [1, 2, 3]})
    assert all(consumer_assignment(whole[:cut]) == {} for cut in range(len(whole) - 4))  # cut before the user data
    assert consumer_assignment(struct.pack(">hi", 0, 2**31 - 1)) == {}  # an absurd count, no loop over it
