"""Partition placement: replicas distinct and on live nodes, replication factors kept, racks apart,
loads even within the stated bounds, and rebalance/decommission moving only what they return."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.errors import InvalidTopicError
from coordinator.placement import (
    Assignment,
    NodeLoad,
    PlacementNode,
    decommission,
    node_loads,
    place_partitions,
    rebalance,
    spread,
)

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)
Topics = list[tuple[int, int]]  # (partition count, replication factor), placed in this order


def domain(node: PlacementNode) -> str:
    """A node's failure domain: its rack, or the node itself when it has none."""
    return f"rack {node.rack}" if node.rack is not None else f"node {node.node_id}"


def rack_count(nodes: Sequence[PlacementNode]) -> int:
    return len({domain(node) for node in nodes})


def rack_multiplicity(replicas: Sequence[int], nodes: Sequence[PlacementNode]) -> int:
    """How many of a partition's replicas share its most used rack (1 = all racks distinct)."""
    by_id = {node.node_id: node for node in nodes}
    return max(Counter(domain(by_id[replica]) for replica in replicas).values())


def rack_bound(replication_factor: int, nodes: Sequence[PlacementNode]) -> int:
    """Replicas sharing a rack when spread as evenly as the racks allow."""
    return math.ceil(replication_factor / rack_count(nodes))


@st.composite
def clusters(draw: st.DrawFn, nodes_min: int = 1) -> tuple[list[PlacementNode], bool]:
    """1 to 9 nodes with scattered ids, either all in 1 to 4 racks or none in any."""
    ids = sorted(draw(st.sets(st.integers(0, 99), min_size=nodes_min, max_size=9)))
    racked = draw(st.booleans())
    racks = draw(st.integers(1, 4))
    return [PlacementNode(node_id, f"r{draw(st.integers(0, racks - 1))}" if racked else None)
            for node_id in ids], racked


topic_lists = st.lists(st.tuples(st.integers(0, 12), st.integers(1, 3)), min_size=1, max_size=5)


def place_all(topics: Topics, nodes: Sequence[PlacementNode]) -> dict[tuple[str, int], tuple[int, ...]]:
    """Place each topic (its replication factor capped at the node count) on top of the ones before,
    checking what every single placement promises."""
    current: dict[tuple[str, int], tuple[int, ...]] = {}
    ids = {node.node_id for node in nodes}
    for number, (partitions, replication_factor) in enumerate(topics):
        factor = min(replication_factor, len(nodes))
        placed = place_partitions(partitions, factor, nodes, current=current)
        assert placed == place_partitions(partitions, factor, nodes, current=dict(current))  # deterministic
        assert len(placed) == partitions
        for partition, replicas in enumerate(placed):
            assert len(replicas) == factor and len(set(replicas)) == factor and set(replicas) <= ids
            assert rack_multiplicity(replicas, nodes) <= rack_bound(factor, nodes)
            current[(f"t{number}", partition)] = replicas
        # Started from an empty (so balanced) cluster: leaders stay within 1 after every topic.
        assert spread(node_loads(current, ids)).leaders <= 1
    return current


def apply(current: Assignment, moves: Assignment) -> dict[tuple[str, int], tuple[int, ...]]:
    assert set(moves) <= set(current)
    assert all(current[key] != replicas for key, replicas in moves.items()), "only changed partitions"
    return {**current, **moves}


def check_moved(before: Assignment, after: Assignment, nodes: Sequence[PlacementNode]) -> None:
    """Every partition keeps its factor, its replicas are distinct and on ``nodes``."""
    ids = {node.node_id for node in nodes}
    assert set(after) == set(before)
    for key, replicas in after.items():
        assert len(replicas) == len(before[key]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= ids, f"{key} still on a node that is gone: {replicas}"


def replicas_moved(before: Assignment, after: Assignment) -> int:
    return sum(len(set(after[key]) - set(before[key])) for key in before)


def check_decommission(current: Assignment, nodes: Sequence[PlacementNode], leaving: int, racked: bool) -> None:
    """Decommission ``leaving``: refused when a partition would have too few nodes, else no replica
    stays on it, factors and rack spread (up to what the remaining racks allow) are kept, and
    without racks both spreads end at most 1."""
    remaining = [node for node in nodes if node.node_id != leaving]
    if any(len(replicas) > len(remaining) for replicas in current.values()):
        with pytest.raises(InvalidTopicError):
            decommission(current, nodes, leaving)
        return
    after = apply(current, decommission(current, nodes, leaving))
    check_moved(current, after, remaining)
    assert all(leaving not in replicas for replicas in after.values())
    for key, replicas in after.items():
        assert rack_multiplicity(replicas, remaining) <= max(rack_multiplicity(current[key], nodes),
                                                             rack_bound(len(replicas), remaining))
    if not racked:
        assert spread(node_loads(after, [node.node_id for node in remaining])).leaders <= 1
        assert spread(node_loads(after, [node.node_id for node in remaining])).replicas <= 1


@PROPERTY_SETTINGS
@given(clusters(), topic_lists)
def test_placing_topics_one_after_another_keeps_replicas_distinct_leaders_even_and_racks_apart(
        cluster: tuple[list[PlacementNode], bool], topics: Topics) -> None:
    nodes, _ = cluster
    current = place_all(topics, nodes)
    for replicas in current.values():
        if len(replicas) <= rack_count(nodes):
            assert rack_multiplicity(replicas, nodes) == 1, f"{replicas} share a rack though enough racks exist"


@PROPERTY_SETTINGS
@given(st.sets(st.integers(0, 99), min_size=1, max_size=9), st.integers(1, 3),
       st.lists(st.integers(0, 12), min_size=1, max_size=5), topic_lists)
def test_without_racks_replica_counts_stay_even(ids: set[int], replication_factor: int, partition_counts: list[int],
                                                mixed: Topics) -> None:
    nodes = [PlacementNode(node_id) for node_id in sorted(ids)]
    one_factor = place_all([(count, replication_factor) for count in partition_counts], nodes)
    assert spread(node_loads(one_factor, ids)).replicas <= 1
    assert rebalance(one_factor, nodes) == {}, "an even assignment needs no move"
    # Mixed replication factors: a leader placed where it must be can cost one replica of evenness.
    assert spread(node_loads(place_all(mixed, nodes), ids)).replicas <= 2


@PROPERTY_SETTINGS
@given(clusters(), topic_lists, st.integers(100, 120), st.sampled_from([None, "r0", "r1", "r9"]), st.data())
def test_a_new_node_gets_its_share_on_rebalance_then_one_node_leaves(
        cluster: tuple[list[PlacementNode], bool], topics: Topics, new_id: int, new_rack: str | None,
        data: st.DataObject) -> None:
    nodes, racked = cluster
    current = place_all(topics, nodes)
    grown = [*nodes, PlacementNode(new_id, new_rack if racked else None)]
    moves = rebalance(current, grown)
    after = apply(current, moves)
    check_moved(current, after, grown)
    for key, replicas in after.items():  # a move never makes a partition's rack spread worse
        assert rack_multiplicity(replicas, grown) <= rack_multiplicity(current[key], grown)
    assert rebalance(after, grown) == {}, "a rebalanced assignment is a fixed point"
    leaving = data.draw(st.sampled_from([node.node_id for node in grown]))
    check_decommission(after, grown, leaving, racked)
    if racked:
        return  # racks of unequal size cap a node's share, so the bounds below hold without racks only
    ids = [node.node_id for node in grown]
    loads = node_loads(after, ids)
    total = sum(len(replicas) for replicas in current.values())
    assert spread(loads) in (NodeLoad(0, 0), NodeLoad(0, 1), NodeLoad(1, 0), NodeLoad(1, 1))
    assert loads[new_id].replicas >= total // len(grown)
    assert loads[new_id].leaders >= len(current) // len(grown)
    before = node_loads(current, ids)
    floor = total // len(grown)
    assert replicas_moved(current, after) <= sum(max(0, load.replicas - floor) for load in before.values())


@PROPERTY_SETTINGS
@given(clusters(nodes_min=2), topic_lists, st.data())
def test_decommission_empties_the_leaving_node_and_keeps_factors(cluster: tuple[list[PlacementNode], bool],
                                                                 topics: Topics, data: st.DataObject) -> None:
    nodes, racked = cluster
    current = place_all(topics, nodes)
    check_decommission(current, nodes, data.draw(st.sampled_from([node.node_id for node in nodes])), racked)


@PROPERTY_SETTINGS
@given(clusters(nodes_min=2), topic_lists, st.data())
def test_rebalance_moves_every_replica_off_nodes_that_are_gone(cluster: tuple[list[PlacementNode], bool],
                                                                topics: Topics, data: st.DataObject) -> None:
    nodes, racked = cluster
    current = place_all(topics, nodes)
    widest = max((len(replicas) for replicas in current.values()), default=1)
    survivors = data.draw(st.lists(st.sampled_from(nodes), min_size=widest, unique=True))
    after = apply(current, rebalance(current, survivors))
    check_moved(current, after, survivors)
    assert rebalance(after, survivors) == {}
    if not racked:
        loads = node_loads(after, [node.node_id for node in survivors])
        assert spread(loads).leaders <= 1 and spread(loads).replicas <= 1


def test_six_partitions_of_factor_two_over_three_nodes_give_each_two_leaders_and_four_replicas() -> None:
    nodes = [PlacementNode(node_id) for node_id in (1, 2, 3)]
    placed = place_partitions(6, 2, nodes)
    assert placed == [(1, 2), (3, 1), (2, 3), (1, 2), (3, 1), (2, 3)]
    assert node_loads({("t", p): replicas for p, replicas in enumerate(placed)}) == {
        1: NodeLoad(leaders=2, replicas=4), 2: NodeLoad(leaders=2, replicas=4), 3: NodeLoad(leaders=2, replicas=4)}


def test_new_partitions_go_to_the_nodes_that_carry_least() -> None:
    nodes = [PlacementNode(node_id) for node_id in (1, 2, 3)]
    current = {("a", 0): (1, 2), ("a", 1): (2, 1)}
    assert place_partitions(1, 2, nodes, current=current) == [(3, 1)]
    # Growing topic a by two partitions: node 3, leading nothing and holding nothing, leads both.
    assert place_partitions(2, 2, nodes, first_partition=2, current=current) == [(3, 1), (3, 2)]


def test_three_racks_put_each_replica_of_a_factor_three_partition_in_a_different_rack() -> None:
    nodes = [PlacementNode(node_id, rack) for node_id, rack in
             [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]]
    placed = place_partitions(6, 3, nodes)
    assert all(rack_multiplicity(replicas, nodes) == 1 for replicas in placed)
    loads = node_loads({("t", p): replicas for p, replicas in enumerate(placed)})
    assert all(load == NodeLoad(leaders=1, replicas=3) for load in loads.values())


def test_two_racks_for_factor_three_put_two_replicas_in_one_rack_never_three() -> None:
    nodes = [PlacementNode(node_id, rack) for node_id, rack in [(1, "a"), (2, "a"), (3, "a"), (4, "b")]]
    placed = place_partitions(4, 3, nodes)
    assert all(4 in replicas for replicas in placed)  # the only node of rack b is in every partition
    assert all(rack_multiplicity(replicas, nodes) == 2 for replicas in placed)


def test_adding_a_fourth_node_moves_exactly_its_share() -> None:
    nodes = [PlacementNode(node_id) for node_id in (1, 2, 3)]
    current = {("t", p): replicas for p, replicas in enumerate(place_partitions(6, 2, nodes))}
    grown = [*nodes, PlacementNode(4)]
    moves = rebalance(current, grown)
    after = apply(current, moves)
    loads = node_loads(after)
    assert all(load.replicas == 3 for load in loads.values()) and loads[4].leaders in (1, 2)
    assert replicas_moved(current, after) == 3
    assert spread(loads).leaders == 1
    assert rebalance(after, grown) == {}


def test_an_even_assignment_is_left_alone_and_a_leader_only_imbalance_is_a_reorder() -> None:
    nodes = [PlacementNode(node_id) for node_id in (1, 2, 3)]
    even = {("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 1)}
    assert rebalance(even, nodes) == {}
    skewed = {("t", 0): (1, 2), ("t", 1): (1, 3), ("t", 2): (3, 2), ("t", 3): (1, 2)}
    after = apply(skewed, rebalance(skewed, nodes))
    assert {key: set(replicas) for key, replicas in after.items()} == {k: set(r) for k, r in skewed.items()}
    assert spread(node_loads(after, [1, 2, 3])).leaders <= 1


def test_replicas_on_nodes_that_are_gone_are_replaced_in_place() -> None:
    nodes = [PlacementNode(node_id) for node_id in (1, 2, 3)]
    current = {("t", 0): (7, 1), ("t", 1): (1, 8), ("t", 2): (2, 3)}
    after = apply(current, rebalance(current, nodes))
    check_moved(current, after, nodes)
    assert after[("t", 0)][1] == 1 and after[("t", 1)][0] == 1  # surviving replicas keep their places
    assert spread(node_loads(after, [1, 2, 3])) == NodeLoad(leaders=0, replicas=0)


def test_decommission_across_racks_keeps_partitions_rack_distinct() -> None:
    nodes = [PlacementNode(node_id, rack) for node_id, rack in
             [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]]
    current = {("t", p): replicas for p, replicas in enumerate(place_partitions(12, 3, nodes))}
    after = apply(current, decommission(current, nodes, 5))
    remaining = [node for node in nodes if node.node_id != 5]
    check_moved(current, after, remaining)
    assert all(rack_multiplicity(replicas, remaining) == 1 for replicas in after.values())
    assert node_loads(after)[6].replicas == 12  # the only node left in rack c is in every partition


@pytest.mark.parametrize("replication_factor", [0, -1, 4])
def test_a_replication_factor_below_1_or_above_the_live_nodes_is_refused(replication_factor: int) -> None:
    with pytest.raises(InvalidTopicError, match="replication factor"):
        place_partitions(3, replication_factor, [PlacementNode(1), PlacementNode(2), PlacementNode(3)])


def test_decommission_refuses_when_too_few_nodes_would_remain() -> None:
    nodes = [PlacementNode(1), PlacementNode(2)]
    current = {("t", 0): (1, 2)}
    with pytest.raises(InvalidTopicError, match="t/0"):
        decommission(current, nodes, 2)
    assert current == {("t", 0): (1, 2)}


def test_a_negative_partition_count_is_refused() -> None:
    with pytest.raises(InvalidTopicError, match="negative"):
        place_partitions(-1, 1, [PlacementNode(1)])


def test_node_loads_lists_idle_nodes_and_spread_measures_evenness() -> None:
    loads = node_loads({("t", 0): (1, 2), ("t", 1): (1,)}, [1, 2, 3])
    assert loads == {1: NodeLoad(2, 2), 2: NodeLoad(0, 1), 3: NodeLoad(0, 0)}
    assert spread(loads) == NodeLoad(leaders=2, replicas=2)
    assert spread({}) == NodeLoad(0, 0)
