"""Assignment strategies: property tests of the invariants every strategy keeps, and of sticky's
minimal movement."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.groups.assignment import assign, range_assign, round_robin_assign, sticky_assign

TOPICS = ["a", "b", "c"]
members_st = st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=0, max_size=8, unique=True)
partitions_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 20), max_size=3)


@st.composite
def group_st(draw):
    members = draw(members_st)
    subscriptions = {m: draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)) for m in members}
    return subscriptions, draw(partitions_st)


def check_invariants(assignment, subscriptions, partitions):
    assert set(assignment) == set(subscriptions)
    owners = {}
    for member, topics in assignment.items():
        for topic, ps in topics.items():
            assert topic in subscriptions[member], "only subscribed topics"
            assert ps, "no empty lists"
            for p in ps:
                assert 0 <= p < partitions[topic]
                assert (topic, p) not in owners, f"{topic}/{p} assigned twice"
                owners[(topic, p)] = member
    for topic, count in partitions.items():
        subscribers = [m for m, ts in subscriptions.items() if topic in ts]
        if subscribers:
            assert all((topic, p) in owners for p in range(count)), "every partition assigned"
            sizes = [len(assignment[m].get(topic, [])) for m in subscribers]
            assert max(sizes) - min(sizes) <= 1, "balanced per topic"
        else:
            assert not any(t == topic for t, _ in owners)


@given(group_st(), st.sampled_from(["range", "round_robin", "sticky"]))
def test_every_strategy_keeps_the_invariants(group, strategy):
    subscriptions, partitions = group
    check_invariants(assign(strategy, subscriptions, partitions), subscriptions, partitions)


@given(group_st(), members_st, st.data())
def test_sticky_moves_the_minimum(group, joining, data):
    subscriptions, partitions = group
    previous = sticky_assign(subscriptions, partitions, {})
    # Some members leave, some join.
    staying = {m: ts for m, ts in subscriptions.items() if data.draw(st.booleans())}
    for m in joining:
        staying.setdefault(m, data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)))
    after = sticky_assign(staying, partitions, previous)
    check_invariants(after, staying, partitions)
    for topic, count in partitions.items():
        subscribers = sorted(m for m, ts in staying.items() if topic in ts)
        if not subscribers:
            continue
        share, extra = divmod(count, len(subscribers))
        held = {m: set(previous.get(m, {}).get(topic, [])) if topic in staying[m] else set() for m in subscribers}
        kept = {m: held[m] & set(after[m].get(topic, [])) for m in subscribers}
        for m in subscribers:
            # A member keeps what it held, up to the larger quota; never loses a partition it
            # could keep while another member gets it instead.
            assert len(kept[m]) >= min(len(held[m]), share)
        moved = sum(len(held[m]) - len(kept[m]) for m in subscribers)
        larger = sorted((len(h) for h in held.values()), reverse=True)
        minimum = sum(max(0, n - (share + (1 if i < extra else 0))) for i, n in enumerate(larger))
        assert moved == minimum, "only excess partitions move"


def test_range_gives_contiguous_ranges_in_member_order():
    subscriptions = {"b": ["t"], "a": ["t"], "c": ["t"]}
    assert range_assign(subscriptions, {"t": 7}) == {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4]}, "c": {"t": [5, 6]}}


def test_round_robin_interleaves_and_rotates_between_topics():
    subscriptions = {"a": ["t", "u"], "b": ["t", "u"]}
    assert round_robin_assign(subscriptions, {"t": 3, "u": 3}) == {
        "a": {"t": [0, 2], "u": [1]}, "b": {"t": [1], "u": [0, 2]}}


def test_three_members_split_six_partitions_two_each():
    subscriptions = {m: ["t"] for m in ("x", "y", "z")}
    for strategy in ("range", "round_robin", "sticky"):
        result = assign(strategy, subscriptions, {"t": 6})
        assert sorted(len(a["t"]) for a in result.values()) == [2, 2, 2]


def test_sticky_keeps_survivors_partitions_when_a_member_leaves():
    before = {"x": {"t": [0, 1]}, "y": {"t": [2, 3]}, "z": {"t": [4, 5]}}
    after = sticky_assign({"x": ["t"], "z": ["t"]}, {"t": 6}, before)
    assert set(after["x"]["t"]) >= {0, 1} and set(after["z"]["t"]) >= {4, 5}
    assert sorted(after["x"]["t"] + after["z"]["t"]) == list(range(6))
