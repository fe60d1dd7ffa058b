"""Usage on a real 3-node cluster (etcd, auth on): what a user produces through one node and
fetches through another is counted where it entered, written to etcd by each node, and read
whole from any node; storage counts every replica (a topic of replication factor 3 holds three
times its bytes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.auth import bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until

PASSWORD = "una-password"
FLUSH_MS = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("usage-cluster")),
                         extra=("--usage-flush-ms", str(FLUSH_MS))) as running:
        yield running


def test_usage_is_counted_where_it_entered_and_read_whole_from_any_node(cluster, token):
    http = cluster.http(1)
    wait_until(lambda: sum(n["alive"] for n in http.json("GET", "/v1/cluster", headers=token)["nodes"]) == 3,
               timeout_s=30)
    http.json("POST", "/v1/users", 201, body={"username": "una", "password": PASSWORD}, headers=token)
    una = bearer(login(http, "una", PASSWORD))
    http.json("POST", "/v1/topics", 201, body={"name": "una.t", "partitions": 1, "replication_factor": 3},
              headers=una)
    for via in (1, 2, 3):  # produced through every node (two of them forward to the leader)
        cluster.http(via).json("POST", "/v1/topics/una.t/records?acks=all", headers=una,
                               body={"records": [{"value": "v" * 1000}] * 4})
    fetched = cluster.http(2).call("GET", "/v1/topics/una.t/partitions/0/records?offset=0&max_records=12",
                                   headers=una)
    assert fetched.status == 200 and len(fetched.json()["records"]) == 12
    size = cluster.http(1).json("GET", "/v1/topics/una.t", headers=una)["partitions"][0]["size_bytes"]

    def row_seen_by(via: int) -> dict | None:
        rows = cluster.http(via).json("GET", "/v1/usage", headers=una)["usage"]
        found = [r for r in rows if r["topic"] == "una.t"]
        if len(found) != 1:
            return None
        row = found[0]
        complete = row["records_in"] == 12 and row["records_out"] == 12 and row["storage_bytes"] == 3 * size
        return row if complete else None

    for via in (1, 2, 3):
        wait_until(lambda via=via: row_seen_by(via) is not None, timeout_s=15)
    row = row_seen_by(3)
    assert row is not None and row["user"] == "una" and row["requests"] == 4
    assert row["bytes_out"] == len(fetched.data)
    everyone = cluster.http(2).json("GET", "/v1/usage?user=una", headers=token)["usage"]
    assert [r["records_in"] for r in everyone if r["topic"] == "una.t"] == [12]
