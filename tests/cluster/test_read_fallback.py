"""Read fallback (DESIGN §6): while a partition's leader is paused and still holds its lease, a
fetch through any node is served by an in-sync replica up to the high watermark that replica
knows; nothing above it is returned. The lease is long here, so the answers come while the paused
node is still the leader on record (no new leader could have served them)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until

LONG_LEASE_MS = 15_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("fallback")),
                         extra=("--lease-ttl-ms", str(LONG_LEASE_MS))) as running:
        yield running


def _leader(cluster: Cluster, via: int, token: dict[str, str]) -> dict[str, object]:
    answer = cluster.http(via).json("GET", "/v1/topics/mirrored", headers=token)
    partition: dict[str, object] = answer["partitions"][0]
    return partition


def test_a_fetch_is_served_by_a_replica_while_the_leader_is_paused(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "mirrored", "partitions": 1, "replication_factor": 3})
    wait_until(lambda: _leader(cluster, 1, token)["leader"] != -1)
    values = [f"v{i}" for i in range(10)]
    cluster.http(2).json("POST", "/v1/topics/mirrored/records?acks=all", headers=token,
                         body={"records": [{"value": v} for v in values]})
    # Every replica learns the high watermark from the leader's next shipment.
    placement = wait_until(lambda: (p := _leader(cluster, 1, token)) and len(p["in_sync_replicas"]) == 3 and p)
    leader = placement["leader"]
    assert isinstance(leader, int)
    others = [n for n in (1, 2, 3) if n != leader]
    time.sleep(1.5)  # a few idle shipments: the followers' high watermarks are current
    os.kill(cluster.nodes[leader].pid, signal.SIGSTOP)
    try:
        paused = time.monotonic()
        for via in others:
            answer = cluster.http(via).json("GET", "/v1/topics/mirrored/partitions/0/records?offset=0",
                                            headers=token)
            assert [r["value"] for r in answer["records"]] == values
            assert answer["high_watermark"] == 10
        assert time.monotonic() - paused < LONG_LEASE_MS / 1000
        assert _leader(cluster, others[0], token)["leader"] == leader, "still the leader on record"
        # Writes are not served by a replica: the leader did not answer lately, so nothing is sent
        # to it and the refusal is a retriable 503 at once.
        reply = cluster.http(others[0]).call("POST", "/v1/topics/mirrored/records?acks=all", headers=token,
                                             body={"records": [{"value": "no"}]})
        assert reply.status == 503 and reply.json()["code"] == "no_leader"
    finally:
        os.kill(cluster.nodes[leader].pid, signal.SIGCONT)
    wait_until(lambda: cluster.http(others[0]).call(
        "POST", "/v1/topics/mirrored/records?acks=all", headers=token,
        body={"records": [{"value": "after"}]}).status == 200)
