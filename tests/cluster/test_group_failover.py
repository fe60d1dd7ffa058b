"""Committed group offsets survive the loss of the node that coordinates groups (docs/operations/clusters.md,
"Replication and failover": ``__consumer_offsets`` is replicated like any topic): with that node killed and not
restarted, another node takes the offsets partition over and answers the committed offsets."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("group-failover"))) as running:
        yield running


def offsets_partition(cluster: Cluster, via: int, token: dict[str, str]) -> dict[str, Any]:
    view = cluster.http(via).json("GET", "/v1/cluster", headers=token)
    found: dict[str, Any] = next(p for t in view["topics"] if t["name"] == "__consumer_offsets"
                                 for p in t["partitions"])
    return found


def test_committed_offsets_outlive_the_coordinating_node(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "kept", "partitions": 2, "replication_factor": 3})
    joined = cluster.http(1).json("POST", "/v1/groups/keeper/members", headers=token,
                                  body={"topics": ["kept"], "session_timeout_ms": 60000})
    cluster.http(1).json("POST", "/v1/groups/keeper/offsets", headers=token,
                         body={"member_id": joined["member_id"], "generation": joined["generation"],
                               "offsets": [{"topic": "kept", "partition": 0, "offset": 7},
                                           {"topic": "kept", "partition": 1, "offset": 3}]})
    placed = offsets_partition(cluster, 1, token)
    assert len(placed["replicas"]) >= 2, f"__consumer_offsets has one replica: {placed}"
    wait_until(lambda: len(offsets_partition(cluster, 1, token)["in_sync_replicas"]) >= 2)
    coordinator = placed["leader"]
    os.kill(cluster.nodes[coordinator].pid, signal.SIGKILL)
    cluster.nodes[coordinator].kill()
    via = next(n for n in (1, 2, 3) if n != coordinator)

    def committed() -> dict[int, int] | None:
        reply = cluster.http(via).call("GET", "/v1/groups/keeper", headers=token)
        if reply.status != 200:
            return None
        return {o["partition"]: o["committed_offset"] for o in reply.json()["offsets"] if o["topic"] == "kept"}

    assert wait_until(committed, timeout_s=LEASE_TTL_MS / 1000 + 20) == {0: 7, 1: 3}
    assert offsets_partition(cluster, via, token)["leader"] not in (-1, coordinator)
