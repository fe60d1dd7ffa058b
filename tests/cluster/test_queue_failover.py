"""A queue fails over with its leadership (DESIGN §6): its partitions and its share-state log
share one replica list, so when the node managing it is killed the next in-sync replica leads
them all and rebuilds the queue from the replicated state log. Acknowledged messages are never
delivered again, leased and unacknowledged ones come back after their visibility timeout, and
messages never received are all still there; when the node returns it manages the queue again
(failback), with the same state."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from logbroker.queues.manager import STATE_TOPIC_PREFIX
from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until

STATE = "the queue's state log"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("queue-failover"))) as running:
        yield running


def _receive(cluster: Cluster, via: int, token: dict[str, str], **body: Any) -> list[dict[str, Any]]:
    reply = cluster.http(via).call("POST", "/v1/queues/work/receive", headers=token,
                                   body={"max_messages": 100, "wait_ms": 500, **body})
    assert reply.status == 200, (reply.status, reply.data[:300])
    messages: list[dict[str, Any]] = reply.json()["messages"]
    return messages


def _placement(cluster: Cluster, via: int, token: dict[str, str], topic: str) -> list[dict[str, Any]]:
    """The partitions of ``topic``, or of the queue's state log for ``STATE``."""
    topics: list[dict[str, Any]] = cluster.http(via).json("GET", "/v1/cluster", headers=token)["topics"]
    return next(t["partitions"] for t in topics
                if t["name"] == topic or (topic == STATE and t["name"].startswith(STATE_TOPIC_PREFIX)))


def test_a_queue_keeps_its_acks_and_leases_across_a_failover_and_a_failback(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    created = cluster.http(2).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "work", "partitions": 2, "kind": "queue", "replication_factor": 2,
                                         "config": {"max_deliveries": 10}})
    replicas = {tuple(p["replicas"]) for p in created["partitions"]}
    assert len(replicas) == 1 and next(iter(replicas))[0] == 2, "one replica list, led by the creating node"
    home, backup = next(iter(replicas))
    state = _placement(cluster, 1, token, STATE)
    assert {tuple(p["replicas"]) for p in state} == replicas, "the state log follows its queue"
    values = [f"m{i}" for i in range(8)]
    cluster.http(1).json("POST", "/v1/queues/work/messages?acks=all", headers=token,
                         body={"records": [{"value": v, "partition": i % 2} for i, v in enumerate(values)]})
    first = _receive(cluster, 3, token, max_messages=4, visibility_timeout_ms=3_000)
    assert len(first) == 4
    acked = first[:2]
    cluster.http(1).json("POST", "/v1/queues/work/ack", headers=token,
                         body={"receipts": [m["receipt"] for m in acked]})
    leased = first[2:]  # received, never acknowledged: back once their lease lapses (or the queue moves)

    os.kill(cluster.nodes[home].pid, signal.SIGKILL)
    cluster.nodes[home].kill()
    wait_until(lambda: all(p["leader"] == backup for t in ("work", STATE)
                           for p in _placement(cluster, backup, token, t)), timeout_s=LEASE_TTL_MS / 1000 + 15)
    seen: list[str] = []

    def drained() -> bool:
        seen.extend(m["value"] for m in _receive(cluster, 3, token, visibility_timeout_ms=60_000))
        return len(seen) >= len(values) - len(acked)

    wait_until(drained, timeout_s=60)
    assert sorted(seen) == sorted(v for v in values if v not in {m["value"] for m in acked}), \
        "acked messages are not delivered again; every other one is"
    assert {m["value"] for m in leased} <= set(seen)

    cluster.start(home)
    wait_until(lambda: all(p["leader"] == home for t in ("work", STATE)
                           for p in _placement(cluster, 1, token, t)), timeout_s=60)
    cluster.http(3).json("POST", "/v1/queues/work/messages?acks=all", headers=token,
                         body={"records": [{"value": "after-failback", "partition": 0}]})
    later = wait_until(lambda: _receive(cluster, 1, token, visibility_timeout_ms=60_000))
    assert [m["value"] for m in later] == ["after-failback"], "the leased messages stay leased after the failback"
