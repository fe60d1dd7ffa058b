"""``leader_racks`` on a real cluster (etcd, nodes 1 and 2 in rack a, 3 and 4 in rack b): a topic
preferring rack b is led from rack b, a killed rack-b leader fails over to the other rack-b
replica, with both rack-b nodes down leadership goes to rack a, and it returns to rack b when
they come back; a live change of the preference moves leadership without moving data, and a
rebalance moves a replica into the preferred rack for partitions that have none there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import Cluster, running_cluster, wait_until

RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}
WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("leader-racks")), size=4, racks=RACKS) as running:
        yield running


def partitions(cluster: Cluster, token: dict[str, str], topic: str, via: int = 1) -> list[dict[str, Any]]:
    return list(cluster.http(via).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"])


def leader_racks_are(cluster: Cluster, token: dict[str, str], topic: str, racks: set[str], via: int = 1) -> bool:
    return all(p["leader"] in RACKS and RACKS[p["leader"]] in racks for p in partitions(cluster, token, topic, via))


def test_leaders_stay_in_the_preferred_rack_through_failover_and_return(cluster: Cluster,
                                                                       token: dict[str, str]) -> None:
    topic = "near.b"
    created = cluster.http(1).json("POST", "/v1/topics", 201, headers=token, body={
        "name": topic, "partitions": 4, "replication_factor": 3, "config": {"leader_racks": ["b"]}})
    assert created["config"]["leader_racks"] == ["b"]
    for p in partitions(cluster, token, topic):
        assert RACKS[p["replicas"][0]] == "b" and {RACKS[n] for n in p["replicas"]} == {"a", "b"}, p
        assert {3, 4} <= set(p["replicas"]), "the third replica goes to the preferred rack"
    wait_until(lambda: leader_racks_are(cluster, token, topic, {"b"}), timeout_s=WAIT_S)
    for n in range(8):
        cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=all", headers=token,
                             body={"records": [{"value": f"r{n}", "partition": n % 4}]})
    wait_until(lambda: all(len(p["in_sync_replicas"]) == 3 for p in partitions(cluster, token, topic)),
               timeout_s=WAIT_S)

    cluster.nodes[3].kill()  # every partition fails over to rack b's other replica
    wait_until(lambda: all(p["leader"] == 4 for p in partitions(cluster, token, topic)), timeout_s=WAIT_S)
    cluster.nodes[4].kill()  # no rack-b replica is left: rack a leads
    wait_until(lambda: leader_racks_are(cluster, token, topic, {"a"}), timeout_s=WAIT_S)
    cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=1", headers=token,
                         body={"records": [{"value": "while b was down", "partition": 0}]})

    cluster.start(3)
    cluster.start(4)
    wait_until(lambda: all(p["leader"] == p["replicas"][0] and len(p["in_sync_replicas"]) == 3
                           for p in partitions(cluster, token, topic)), timeout_s=WAIT_S)
    assert leader_racks_are(cluster, token, topic, {"b"}, via=2)
    records = cluster.http(3).json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0", headers=token)
    assert [r["value"] for r in records["records"]] == ["r0", "r4", "while b was down"]


def test_a_live_change_of_the_preference_moves_leadership(cluster: Cluster, token: dict[str, str]) -> None:
    topic = "near.changed"
    wait_until(lambda: all(n["alive"] for n in cluster.http(1).json("GET", "/v1/cluster", headers=token)["nodes"]),
               timeout_s=WAIT_S)
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                         body={"name": topic, "partitions": 4, "replication_factor": 3})
    wait_until(lambda: all(p["leader"] != -1 for p in partitions(cluster, token, topic)), timeout_s=WAIT_S)
    before = {p["partition"]: p["replicas"] for p in partitions(cluster, token, topic)}
    for rack in ("a", "b"):
        altered = cluster.http(2).json("PATCH", f"/v1/topics/{topic}/config", 200, headers=token,
                                       body={"leader_racks": [rack]})
        assert altered["config"]["leader_racks"] == [rack]
        wait_until(lambda: leader_racks_are(cluster, token, topic, {rack}), timeout_s=WAIT_S)  # noqa: B023
    assert {p["partition"]: p["replicas"] for p in partitions(cluster, token, topic)} == before, "no data moved"
    cluster.http(1).json("PATCH", f"/v1/topics/{topic}/config", 200, headers=token, body={"leader_racks": None})
    assert cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)["config"]["leader_racks"] == []
    for bad in (["b", "b"], "b", [""]):
        reply = cluster.http(1).call("PATCH", f"/v1/topics/{topic}/config", headers=token,
                                     body={"leader_racks": bad})
        assert reply.status == 400, bad


def test_a_rebalance_moves_a_replica_into_the_preferred_rack(cluster: Cluster, token: dict[str, str]) -> None:
    topic = "near.moved"
    wait_until(lambda: all(n["alive"] for n in cluster.http(1).json("GET", "/v1/cluster", headers=token)["nodes"]),
               timeout_s=WAIT_S)
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token, body={
        "name": topic, "partitions": 4, "replication_factor": 1, "config": {"leader_racks": ["a"]}})
    wait_until(lambda: leader_racks_are(cluster, token, topic, {"a"}), timeout_s=WAIT_S)
    for p in range(4):
        cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=all", headers=token,
                             body={"records": [{"value": f"p{p}", "partition": p}]})
    cluster.http(1).json("PATCH", f"/v1/topics/{topic}/config", 200, headers=token, body={"leader_racks": ["b"]})
    assert leader_racks_are(cluster, token, topic, {"a"}), "no replica in rack b: nothing to hand over to"
    moved = cluster.http(2).json("POST", "/v1/cluster/rebalance", headers=token)
    assert not moved["failed"], moved
    assert {m["partition"] for m in moved["moves"] if m["topic"] == topic} == {0, 1, 2, 3}
    wait_until(lambda: leader_racks_are(cluster, token, topic, {"b"}), timeout_s=WAIT_S)
    for p in range(4):
        page = cluster.http(1).json("GET", f"/v1/topics/{topic}/partitions/{p}/records?offset=0", headers=token)
        assert [r["value"] for r in page["records"]] == [f"p{p}"], "the record moved with its replica"
