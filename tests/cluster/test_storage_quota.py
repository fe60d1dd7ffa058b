"""The storage quota on a real 3-node cluster (etcd, auth on): a user's bytes are summed over
the partitions of what they own at each partition's leader (replicas counted once), every node
learns the sum within seconds, and every node then refuses the owner's next write with 403
``storage_quota_exceeded``, also for partitions it does not lead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.auth import bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until

LIMIT = 150_000
VALUE = "v" * 10_000
PASSWORD = "ann-password"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("storage-cluster")),
                         extra=("--quota-storage-bytes-max", str(LIMIT))) as running:
        yield running


def stored(cluster: Cluster, token: dict[str, str], topic: str) -> int:
    """The sum of the topic's partitions' sizes at their leaders."""
    partitions = cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"]
    assert all(isinstance(p["size_bytes"], int) for p in partitions), partitions
    return sum(p["size_bytes"] for p in partitions)


def test_every_node_knows_a_users_cluster_wide_bytes_and_refuses_past_the_limit(cluster, token):
    http = cluster.http(1)
    http.json("POST", "/v1/users", 201, body={"username": "ann", "password": PASSWORD}, headers=token)
    ann = bearer(login(http, "ann", PASSWORD))
    created = http.json("POST", "/v1/topics", 201, body={"name": "ann.t", "partitions": 3, "replication_factor": 2},
                        headers=ann)
    assert {p["leader"] for p in created["partitions"]} == {1, 2, 3}
    for n in range(LIMIT // len(VALUE) + 30):  # each partition in turn, through node 1 (bounded)
        reply = http.call("POST", "/v1/topics/ann.t/records", body={"records": [{"value": VALUE, "partition": n % 3}]},
                          headers=ann)
        if reply.status != 200:
            break
    assert reply.status == 403 and reply.json()["code"] == "storage_quota_exceeded", (reply.status, reply.data[:300])
    total = stored(cluster, token, "ann.t")
    assert total >= LIMIT - len(VALUE)

    def every_node_agrees() -> bool:
        return all(cluster.http(via).json("GET", "/v1/users/ann", headers=ann)["storage"]
                   == {"used_bytes": total, "limit_bytes": LIMIT} for via in (1, 2, 3))

    wait_until(every_node_agrees, timeout_s=10)  # replicas counted once: the leaders' sizes only
    for via in (1, 2, 3):
        for partition in range(3):
            refused = cluster.http(via).call("POST", "/v1/topics/ann.t/records", headers=ann,
                                             body={"records": [{"value": VALUE, "partition": partition}]})
            assert refused.status == 403 and refused.json()["code"] == "storage_quota_exceeded", (via, partition)
    assert stored(cluster, token, "ann.t") == total, "nothing was stored"
    http.json("PUT", "/v1/users/ann/quotas", body={"storage_bytes_max": 10 * LIMIT}, headers=token)
    wait_until(lambda: cluster.http(3).call("POST", "/v1/topics/ann.t/records", headers=ann,
                                            body={"records": [{"value": "again", "partition": 0}]}).status == 200)
