"""The watcher's merge of several nodes' cluster views (``chaos.workload.newest``): the newest
leadership of each partition wins, whichever node was behind."""

from __future__ import annotations

from typing import Any

from chaos.workload import newest


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
