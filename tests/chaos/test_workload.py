"""The watcher's merge of several nodes' cluster views (``chaos.workload.newest``): the newest
leadership of each partition wins, whichever node was behind."""

from __future__ import annotations

from typing import Any

from chaos.workload import NodeViews, newest


def view(*partitions: tuple[str, int, int, int]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, number, leader, epoch in partitions:
        topics.setdefault(topic, []).append({"partition": number, "leader": leader, "leader_epoch": epoch,
                                             "in_sync_replicas": [1, 2]})
    return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


def test_the_highest_epoch_wins_and_a_lost_leader_outranks_the_same_epochs_leader():
    behind = view(("chaos", 0, 1, 4), ("chaos", 1, 2, 7), ("q", 0, 3, 2))
    ahead = view(("chaos", 0, 2, 5), ("chaos", 1, -1, 7))
    merged = newest([behind, ahead])
    assert merged["chaos/0"][:2] == (2, 5)
    assert merged["chaos/1"][:2] == (-1, 7), "the leader's key went with its lease: no leader at that epoch"
    assert merged["q/0"] == (3, 2, [1, 2]), "a partition one node alone shows"
    assert newest([ahead, behind]) == merged, "whatever the order the nodes answered in"
    assert newest([]) == {}


def test_a_node_that_stopped_answering_stops_counting():
    views = NodeViews(3, max_age_s=2.0)
    views.seen(1, view(("chaos", 0, 1, 4)), at=10.0)
    views.seen(2, view(("chaos", 0, 1, 4)), at=10.0)
    assert views.merged(11.0)["chaos/0"][:2] == (1, 4)
    views.seen(2, view(("chaos", 0, -1, 4)), at=12.5)
    assert views.merged(12.6)["chaos/0"][:2] == (-1, 4), "node 1's view from 10.0 is too old to keep the leader"
    views.seen(3, view(("chaos", 0, 3, 5)), at=12.7)
    assert views.merged(12.8)["chaos/0"][:2] == (3, 5), "a new leadership one node reports wins at once"
    assert views.merged(30.0) == {}, "nothing young enough: no view"


def test_every_node_failing_is_said_once_until_one_answers():
    views = NodeViews(2, max_age_s=2.0)
    assert not views.failed(1)
    assert views.failed(2), "the second node failing too makes every node's latest call a failed one"
    assert not views.failed(1) and not views.failed(2), "said once"
    views.seen(1, view(("chaos", 0, 1, 1)), at=1.0)
    assert views.failed(1), "after an answer, every node failing again is said again"
