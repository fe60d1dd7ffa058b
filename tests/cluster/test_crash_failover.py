"""A crashed leader's partitions move before its lease could lapse (decision 0260): after kill -9,
its peers find every address it registered refusing connections, end its session in etcd, and
another replica leads. The lease here is long, so a new leader within the bound below can only
come from the ended session, never from the lease running out: the last keepalive the killed
node sent was at most a third of the TTL before the kill, so its lease lives on at least two
thirds of the TTL after it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until

LONG_LEASE_MS = 30_000
# Well inside two thirds of the TTL (20 s): the killed node's lease cannot have lapsed by then.
BEFORE_THE_LEASE_S = 12.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("crash")),
                         extra=("--lease-ttl-ms", str(LONG_LEASE_MS))) as running:
        yield running


def _partition(cluster: Cluster, via: int, token: dict[str, str], topic: str) -> dict[str, object]:
    answer = cluster.http(via).json("GET", f"/v1/topics/{topic}", headers=token)
    partition: dict[str, object] = answer["partitions"][0]
    return partition


def _alive(cluster: Cluster, via: int, token: dict[str, str]) -> set[int]:
    answer = cluster.http(via).json("GET", "/v1/cluster", headers=token)
    return {int(n["node_id"]) for n in answer["nodes"] if n["alive"]}


def test_a_killed_leader_is_replaced_before_its_lease_could_lapse(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "crashy", "partitions": 1, "replication_factor": 3})
    placed = wait_until(lambda: (p := _partition(cluster, 1, token, "crashy")) and p["leader"] != -1
                        and len(p["in_sync_replicas"]) == 3 and p)
    victim = placed["leader"]
    assert isinstance(victim, int)
    survivors = [n for n in (1, 2, 3) if n != victim]
    cluster.http(survivors[0]).json("POST", "/v1/topics/crashy/records?acks=all", headers=token,
                                    body={"records": [{"value": "before"}]})

    cluster.nodes[victim].kill()
    killed = time.monotonic()
    moved = wait_until(lambda: (p := _partition(cluster, survivors[0], token, "crashy"))
                       and p["leader"] in survivors and p, timeout_s=BEFORE_THE_LEASE_S, interval_s=0.05)
    assert time.monotonic() - killed < BEFORE_THE_LEASE_S
    assert moved["leader_epoch"] == placed["leader_epoch"] + 1
    wait_until(lambda: victim not in _alive(cluster, survivors[1], token), timeout_s=2.0)
    assert time.monotonic() - killed < BEFORE_THE_LEASE_S, "the killed node's session was ended"

    answer = cluster.http(survivors[1]).json("POST", "/v1/topics/crashy/records?acks=all", headers=token,
                                             body={"records": [{"value": "after"}]})
    assert answer["offsets"][0]["offset"] == 1
    read = cluster.http(survivors[0]).json("GET", "/v1/topics/crashy/partitions/0/records?offset=0", headers=token)
    assert [r["value"] for r in read["records"]] == ["before", "after"]
