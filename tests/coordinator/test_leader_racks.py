"""``leader_racks``: the config value's checks, placement of preferred leaders in the first listed
rack with a live node (replicas still spread over racks), and rebalance keeping that preference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.errors import InvalidTopicError
from coordinator.leader_racks import LEADER_RACKS_MAX, leader_racks, parse_leader_racks, rack_rank
from coordinator.models import TopicSpec
from coordinator.placement import Assignment, PlacementNode, place_partitions, rebalance
from segments.config import LogConfig
from tests.coordinator.test_placement import apply, check_moved, rack_bound, rack_count, rack_multiplicity

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)
RACKS = ("r0", "r1", "r2", "r3", "r9")  # r9: a rack no node is in


@st.composite
def racked_clusters(draw: st.DrawFn, nodes_min: int = 1) -> list[PlacementNode]:
    """1 to 9 nodes in 1 to 4 racks (some, now and then, in none)."""
    ids = sorted(draw(st.sets(st.integers(0, 99), min_size=nodes_min, max_size=9)))
    racks = draw(st.integers(1, 4))
    return [PlacementNode(node_id, draw(st.sampled_from([*RACKS[:racks], None]))) for node_id in ids]


preferences = st.lists(st.sampled_from(RACKS), max_size=3, unique=True).map(tuple)
topic_lists = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 3), preferences), min_size=1, max_size=4)


def best_rank(nodes: Sequence[PlacementNode], racks: Sequence[str]) -> int:
    return min(rack_rank(node.rack, racks) for node in nodes)


def rank(node_id: int, nodes: Sequence[PlacementNode], racks: Sequence[str]) -> int:
    return rack_rank({n.node_id: n.rack for n in nodes}[node_id], racks)


def place_all(topics: list[tuple[int, int, tuple[str, ...]]], nodes: Sequence[PlacementNode]
              ) -> tuple[dict[tuple[str, int], tuple[int, ...]], dict[str, tuple[str, ...]]]:
    current: dict[tuple[str, int], tuple[int, ...]] = {}
    wanted = {}
    for number, (partitions, factor, racks) in enumerate(topics):
        factor = min(factor, len(nodes))
        placed = place_partitions(partitions, factor, nodes, current=current, leader_racks=racks)
        assert placed == place_partitions(partitions, factor, nodes, current=dict(current), leader_racks=racks)
        for partition, replicas in enumerate(placed):
            assert len(set(replicas)) == factor and set(replicas) <= {n.node_id for n in nodes}
            assert rack_multiplicity(replicas, nodes) <= rack_bound(factor, nodes), "racks spread as without it"
            if factor <= rack_count(nodes):
                assert rack_multiplicity(replicas, nodes) == 1
            assert rank(replicas[0], nodes, racks) == best_rank(nodes, racks), \
                f"{replicas} leads outside the first live rack of {racks}"
            current[(f"t{number}", partition)] = replicas
        wanted[f"t{number}"] = racks
    return current, wanted


@PROPERTY_SETTINGS
@given(racked_clusters(), topic_lists)
def test_the_preferred_leader_is_in_the_first_listed_rack_that_has_a_live_node(
        nodes: list[PlacementNode], topics: list[tuple[int, int, tuple[str, ...]]]) -> None:
    place_all(topics, nodes)


def test_a_third_replica_over_two_racks_goes_to_the_preferred_rack() -> None:
    nodes = [PlacementNode(1, "a"), PlacementNode(2, "a"), PlacementNode(3, "b"), PlacementNode(4, "b")]
    for replicas in place_partitions(4, 3, nodes, leader_racks=("b",)):
        assert replicas[0] in (3, 4) and {3, 4} <= set(replicas), "a failover in rack b stays in rack b"
    assert [r[0] for r in place_partitions(4, 2, nodes, leader_racks=("b",))] == [3, 4, 3, 4]
    assert [r[0] for r in place_partitions(4, 2, nodes, leader_racks=("z", "a"))] == [1, 2, 1, 2]


def check_preferred(after: Assignment, nodes: Sequence[PlacementNode], wanted: Mapping[str, Sequence[str]]) -> None:
    """No partition has a follower in a better-ranked rack than its preferred leader."""
    for (topic, _), replicas in after.items():
        racks = wanted.get(topic, ())
        assert rank(replicas[0], nodes, racks) == min(rank(n, nodes, racks) for n in replicas), (topic, replicas)


@PROPERTY_SETTINGS
@given(racked_clusters(nodes_min=2), topic_lists, st.data())
def test_rebalance_keeps_or_restores_the_preference_and_is_a_fixed_point(
        nodes: list[PlacementNode], topics: list[tuple[int, int, tuple[str, ...]]], data: st.DataObject) -> None:
    current, wanted = place_all(topics, nodes)
    widest = max((len(replicas) for replicas in current.values()), default=1)
    survivors = data.draw(st.lists(st.sampled_from(nodes), min_size=widest, unique=True))
    extra = data.draw(st.lists(st.builds(PlacementNode, st.integers(100, 105), st.sampled_from([*RACKS, None])),
                               max_size=2, unique_by=lambda n: n.node_id))
    live = [*survivors, *extra]
    changed = {topic: data.draw(preferences) if data.draw(st.booleans()) else racks for topic, racks in wanted.items()}
    after = apply(current, rebalance(current, live, changed))
    check_moved(current, after, live)
    check_preferred(after, live, changed)
    for key, replicas in after.items():
        if all(node in {n.node_id for n in live} for node in current[key]):
            assert rack_multiplicity(replicas, live) <= rack_multiplicity(current[key], live)
    assert rebalance(after, live, changed) == {}, "a rebalanced assignment is a fixed point"


def test_a_live_change_moves_the_preferred_leader_by_a_reorder_or_a_move() -> None:
    nodes = [PlacementNode(1, "a"), PlacementNode(2, "b"), PlacementNode(3, "c")]
    current = {("t", 0): (1, 2), ("t", 1): (1, 3)}
    moves = rebalance(current, nodes, {"t": ("b",)})
    assert moves[("t", 0)] == (2, 1), "a replica in rack b already: a reorder"
    assert moves[("t", 1)][0] == 2 and 3 in moves[("t", 1)], "none there: the leader's replica moves to rack b"


def test_the_config_value_is_an_ordered_list_of_distinct_rack_names() -> None:
    assert parse_leader_racks(["b", "a"]) == ("b", "a")
    assert parse_leader_racks([]) == ()
    for bad in ("b", ["b", "b"], [""], [3], ["x" * 101], ["a\n"], [f"r{i}" for i in range(LEADER_RACKS_MAX + 1)]):
        with pytest.raises(InvalidTopicError) as caught:
            parse_leader_racks(bad)
        assert caught.value.extra["field"] == "config.leader_racks"
    assert leader_racks({"leader_racks": ["b"]}) == ("b",) and leader_racks({}) == ()
    queue = {"name": "q", "kind": "queue", "config": {"leader_racks": ["b"]}}
    with pytest.raises(InvalidTopicError, match="not queues"):
        TopicSpec.parse(queue, base_config=LogConfig())
    TopicSpec.parse({**queue, "config": {"leader_racks": []}}, base_config=LogConfig())


@given(st.one_of(st.text(max_size=5), st.integers(), st.lists(st.one_of(st.text(max_size=3), st.integers()),
                                                               max_size=4)))
def test_a_topic_spec_holds_leader_racks_to_the_same_rule(value: object) -> None:
    body = {"name": "t", "replication_factor": 2, "config": {"leader_racks": value}}
    try:
        expected: tuple[str, ...] | None = parse_leader_racks(value)
    except InvalidTopicError:
        expected = None
    if expected is None:
        with pytest.raises(InvalidTopicError):
            TopicSpec.parse(body, base_config=LogConfig())
    else:
        spec = TopicSpec.parse(body, base_config=LogConfig())
        assert leader_racks(spec.config) == expected
        assert spec.log_config(LogConfig()) == LogConfig(), "not a storage key"
