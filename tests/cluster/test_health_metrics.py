"""The gauges and counters an operator pages on, scraped from real nodes on a real etcd while
faults happen (kill -9, SIGSTOP past the lease): under-replicated and under-min-ISR partitions
on the surviving leader, ISR shrinks and expands, leaderships taken up and given up, partitions
left without any leader, the coordinator session lost and back, and the data directory's free
space."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.auth import METRICS_TOKEN, bearer
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until

NODES = (1, 2)
HEAL_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("health-cluster")), size=len(NODES)) as running:
        yield running


def scrape(cluster: Cluster, node: int) -> dict[str, float]:
    """The node's unlabelled samples, and the ``change`` samples of leadership changes and the
    ``follower`` samples of replication as ``name:label``."""
    reply = cluster.http(node).call("GET", "/metrics", headers=bearer(METRICS_TOKEN))
    assert reply.status == 200, reply.status
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(reply.data.decode()):
        for sample in family.samples:
            if not sample.labels:
                out[sample.name] = sample.value
            elif set(sample.labels) in ({"change"}, {"follower"}) and sample.name.endswith("_total"):
                out[f"{sample.name}:{next(iter(sample.labels.values()))}"] = sample.value
    return out


def placement(cluster: Cluster, via: int, token: dict[str, str], topic: str) -> list[dict[str, Any]]:
    topics = cluster.http(via).json("GET", "/v1/cluster", headers=token)["topics"]
    found: list[dict[str, Any]] = next(t["partitions"] for t in topics if t["name"] == topic)
    return found


def healthy(cluster: Cluster, via: int) -> dict[str, float] | None:
    seen = scrape(cluster, via)
    ok = (seen["logbroker_under_replicated_partitions"] == 0 and seen["logbroker_offline_partitions"] == 0
          and seen["logbroker_coordinator_session_up"] == 1)
    return seen if ok else None


def test_a_killed_node_shows_as_under_replicated_offline_and_isr_changes_until_it_returns(
        cluster: Cluster, token: dict[str, str]):
    http = cluster.http(1)
    http.json("POST", "/v1/topics", expect=201, headers=token,
              body={"name": "watched", "partitions": 2, "replication_factor": 2, "config": {"min_insync_replicas": 2}})
    http.json("POST", "/v1/topics", expect=201, headers=token,
              body={"name": "single", "partitions": 4, "replication_factor": 1})
    wait_until(lambda: all(sorted(p["in_sync_replicas"]) == [1, 2] and p["leader"] in NODES
                           for p in placement(cluster, 1, token, "watched")))
    lonely = [p for p in placement(cluster, 1, token, "single") if p["replicas"] == [2]]
    assert lonely, "no partition of 'single' placed on node 2 alone"
    before = {node: wait_until(lambda n=node: healthy(cluster, n)) for node in NODES}
    for node, seen in before.items():
        assert seen["logbroker_coordinator_lease_remaining_seconds"] > 0
        assert 0 < seen["logbroker_disk_free_bytes"] <= seen["logbroker_disk_total_bytes"]
        assert seen["logbroker_leadership_changes_total:started"] >= seen["logbroker_leader_partitions"] > 0, node
    assert sum(seen["logbroker_leader_partitions"] for seen in before.values()) >= 2 + 4

    os.kill(cluster.nodes[2].pid, signal.SIGKILL)
    cluster.nodes[2].kill()
    try:
        # Node 1 leads both partitions of 'watched' alone (ISR [1], under min.insync.replicas 2), and
        # the partitions of 'single' held by node 2 alone have no leader anywhere.
        after = wait_until(lambda: (s := scrape(cluster, 1))["logbroker_under_replicated_partitions"] >= 2
                           and s["logbroker_offline_partitions"] >= len(lonely) and s, timeout_s=HEAL_S)
        assert after["logbroker_under_min_isr_partitions"] >= 2
        assert after["logbroker_isr_shrinks_total"] > before[1]["logbroker_isr_shrinks_total"]
        assert after["logbroker_offline_partitions"] == len(lonely)
        assert after["logbroker_coordinator_session_up"] == 1
    finally:
        cluster.start(2)
    back = wait_until(lambda: healthy(cluster, 1), timeout_s=HEAL_S)
    assert back["logbroker_isr_expands_total"] > after["logbroker_isr_expands_total"]


def test_a_leader_counts_the_replicate_calls_entries_and_bytes_it_shipped_to_each_follower(
        cluster: Cluster, token: dict[str, str]):
    http = cluster.http(1)
    http.json("POST", "/v1/topics", expect=201, headers=token,
              body={"name": "shipped", "partitions": 1, "replication_factor": 2})
    partition = wait_until(lambda: next((p for p in placement(cluster, 1, token, "shipped")
                                         if sorted(p["in_sync_replicas"]) == [1, 2]), None))
    leader, follower = partition["leader"], 3 - partition["leader"]
    key = f"logbroker_replication_bytes_total:{follower}"
    before = scrape(cluster, leader)
    value = "x" * 4000
    cluster.http(leader).json("POST", "/v1/topics/shipped/records?acks=all", headers=token,
                              body={"records": [{"value": value, "partition": 0}]})
    after = scrape(cluster, leader)
    assert after[key] - before.get(key, 0) >= len(value)
    for counter in ("calls", "entries"):
        name = f"logbroker_replication_{counter}_total:{follower}"
        assert after[name] > before.get(name, 0)
    assert f"logbroker_replication_calls_total:{leader}" not in after, "a node ships nothing to itself"


def test_a_node_paused_past_its_lease_counts_its_lost_session_and_its_ended_leaderships(
        cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "paused", "partitions": 4, "replication_factor": 2})
    before = wait_until(lambda: (s := healthy(cluster, 2)) and s["logbroker_leader_partitions"] > 0 and s,
                        timeout_s=HEAL_S)
    assert before["logbroker_coordinator_session_losses_total"] == 0
    os.kill(cluster.nodes[2].pid, signal.SIGSTOP)
    try:
        wait_until(lambda: not any(p["leader"] == 2 for p in placement(cluster, 1, token, "paused")),
                   timeout_s=LEASE_TTL_MS / 1000 * 5)
    finally:
        os.kill(cluster.nodes[2].pid, signal.SIGCONT)
    after = wait_until(lambda: (s := scrape(cluster, 2))["logbroker_coordinator_session_losses_total"] >= 1 and s,
                       timeout_s=HEAL_S)
    assert after["logbroker_leadership_changes_total:ended"] > before["logbroker_leadership_changes_total:ended"]
    wait_until(lambda: healthy(cluster, 2), timeout_s=HEAL_S)
