"""A topic config change on a real three-node etcd cluster: stored once (the sealed topic record),
carried by the watch to every node, and applied live by every replica: the leader's
``min_insync_replicas`` decides ``acks=all`` at once, a follower's log rolls at the new segment
size, a follower that restarts comes back with the change, and a follower that becomes leader
enforces it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from logbroker.replica_manager import partition_dir_name
from tests.cluster.test_replication import (
    FAILOVER_S,
    HEAL_S,
    NODES,
    REPLICA_LAG_MS,
    create,
    heal,
    kill,
    led_elsewhere,
    partition,
    produce,
)
from tests.support.cluster import Cluster, running_cluster, wait_until
from tests.support.nodes import SMALL_SEGMENTS


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("topic-config")),
                         extra=("--replica-lag-ms", str(REPLICA_LAG_MS), *SMALL_SEGMENTS)) as running:
        yield running


def config_on(cluster: Cluster, node: int, token: dict[str, str], topic: str) -> dict[str, Any]:
    config: dict[str, Any] = cluster.http(node).json("GET", f"/v1/topics/{topic}", headers=token)["config"]
    return config


def alter(cluster: Cluster, via: int, token: dict[str, str], topic: str, changes: dict[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = cluster.http(via).json("PATCH", f"/v1/topics/{topic}/config", headers=token,
                                                       body=changes)
    return described


def everywhere(cluster: Cluster, token: dict[str, str], topic: str, key: str, value: Any) -> None:
    for node in NODES:
        wait_until(lambda n=node: config_on(cluster, n, token, topic)[key] == value, timeout_s=HEAL_S)


def refused(reply: Any) -> bool:
    return bool(reply.status == 503 and reply.json()["code"] == "not_enough_replicas")


def test_min_insync_replicas_changes_on_the_leader_and_every_replica_and_survives_a_restart(
        cluster: Cluster, token: dict[str, str]):
    heal(cluster, token)
    placed = create(cluster, token, "cfg.isr", 1, 3)[0]
    leader = placed["leader"]
    near, far = (n for n in placed["replicas"] if n != leader)
    assert alter(cluster, near, token, "cfg.isr", {"min_insync_replicas": 3})["config"]["min_insync_replicas"] == 3
    everywhere(cluster, token, "cfg.isr", "min_insync_replicas", 3)
    assert produce(cluster, leader, token, "cfg.isr", 0, "three in sync", "all").status == 200

    kill(cluster, far)  # the ISR shrinks to two: under the new minimum
    wait_until(lambda: len(partition(cluster, leader, "cfg.isr", 0, token)["in_sync_replicas"]) == 2,
               timeout_s=FAILOVER_S)
    before = partition(cluster, leader, "cfg.isr", 0, token)["log_end_offset"]
    assert refused(produce(cluster, leader, token, "cfg.isr", 0, "refused", "all"))
    assert partition(cluster, leader, "cfg.isr", 0, token)["log_end_offset"] == before

    alter(cluster, leader, token, "cfg.isr", {"min_insync_replicas": 2})  # lowered: the same leader takes it
    reply = produce(cluster, leader, token, "cfg.isr", 0, "two in sync", "all")
    assert reply.status == 200, (reply.status, reply.data[:300])

    cluster.start(far)  # the restarted follower reads the change from etcd
    assert config_on(cluster, far, token, "cfg.isr")["min_insync_replicas"] == 2
    wait_until(lambda: sorted(partition(cluster, leader, "cfg.isr", 0, token)["in_sync_replicas"])
               == sorted(placed["replicas"]), timeout_s=HEAL_S)

    alter(cluster, far, token, "cfg.isr", {"min_insync_replicas": 3})
    everywhere(cluster, token, "cfg.isr", "min_insync_replicas", 3)
    kill(cluster, leader)  # a follower that got the change by the watch leads now, with two in sync
    moved = wait_until(lambda: (p := led_elsewhere(cluster, near, "cfg.isr", leader, token))
                       and len(p["in_sync_replicas"]) == 2 and p, timeout_s=FAILOVER_S)
    assert refused(produce(cluster, moved["leader"], token, "cfg.isr", 0, "refused again", "all"))
    heal(cluster, token)


def segment_files(cluster: Cluster, node: int, topic: str) -> int:
    directory = os.path.join(cluster.nodes[node].data_dir, partition_dir_name(topic, 0))
    return sum(1 for name in os.listdir(directory) if name.endswith(".log"))


def test_a_smaller_segment_size_reaches_the_followers_logs(cluster: Cluster, token: dict[str, str]):
    heal(cluster, token)
    placed = create(cluster, token, "cfg.roll", 1, 3)[0]
    leader = placed["leader"]
    for i in range(4):
        assert produce(cluster, leader, token, "cfg.roll", 0, f"big segments {i}" + "x" * 300, "all").status == 200
    assert [segment_files(cluster, n, "cfg.roll") for n in NODES] == [1, 1, 1]
    alter(cluster, leader, token, "cfg.roll", {"segment_bytes": 1024})
    everywhere(cluster, token, "cfg.roll", "segment_bytes", 1024)
    for i in range(8):
        assert produce(cluster, leader, token, "cfg.roll", 0, f"small segments {i}" + "x" * 300, "all").status == 200
    wait_until(lambda: all(segment_files(cluster, n, "cfg.roll") >= 3 for n in NODES), timeout_s=HEAL_S)


def test_bad_changes_are_refused_on_any_node_and_change_nothing(cluster: Cluster, token: dict[str, str]):
    heal(cluster, token)
    create(cluster, token, "cfg.bad", 1, 2)
    before = {n: config_on(cluster, n, token, "cfg.bad") for n in NODES}
    for body in ({"min_insync_replicas": 3}, {"replication_factor": 3}, {"retention_mz": 1}, {"flush_ms": "x"}):
        reply = cluster.http(NODES[-1]).call("PATCH", "/v1/topics/cfg.bad/config", headers=token, body=body)
        assert reply.status == 400 and reply.json()["code"] == "invalid_topic", (body, reply.data)
    assert {n: config_on(cluster, n, token, "cfg.bad") for n in NODES} == before
