"""Real nodes on a real etcd that serves TLS with ``--client-cert-auth`` (DESIGN §5, decisions
0225 and 0226): the nodes, holding etcd's client certificate, work end to end; a client holding
valid etcd credentials but not the cluster's secret writes an admin user, a grant and a new owner
of a topic straight into etcd, and no node lets any of them in (each node logs and counts the
records it ignored); a node given a plain ``etcd://`` URL says in its log that etcd is reached
without TLS."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator

import pytest

from coordinator.etcd_client import EtcdAccess, EtcdClient, op_put
from coordinator.etcd_keys import acl_key, cluster_prefix, encode, topic_key, user_key
from coordinator.users import UserRecord
from logbroker.auth.passwords import hash_password
from logbroker.etcd_settings import PLAINTEXT_WARNING
from tests.support.auth import METRICS_TOKEN, bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until
from tests.support.etcd import running_etcd
from tests.support.nodes import NodeProcess

NODES = (1, 2)
FORGED_PASSWORD = "mallory-password-1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("tls-cluster")), size=len(NODES), etcd_tls=True) as running:
        yield running


def rejected(cluster: Cluster, node_id: int) -> float:
    text = cluster.http(node_id).call("GET", "/metrics", headers=bearer(METRICS_TOKEN)).data.decode()
    found = re.search(r"^logbroker_etcd_rejected_records_total (\S+)$", text, re.MULTILINE)
    assert found, "no logbroker_etcd_rejected_records counter"
    return float(found.group(1))


def write_into_etcd(cluster: Cluster, puts: dict[str, bytes]) -> None:
    """Put ``puts`` (keys relative to the cluster prefix) with etcd's own client certificate."""
    certs = cluster.etcd.certs
    assert certs is not None

    async def put() -> None:
        client = EtcdClient([cluster.etcd.endpoint],
                            access=EtcdAccess(certs["ca"], certs["client_cert"], certs["client_key"]))
        try:
            prefix = cluster_prefix("logbroker")
            await client.txn([], [op_put(f"{prefix}{key}".encode(), value) for key, value in puts.items()])
        finally:
            await client.close()

    asyncio.run(put())


def test_nodes_with_the_client_certificate_work_end_to_end(cluster: Cluster, token: dict[str, str]):
    assert cluster.etcd.url.startswith("etcds://")
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "over-tls", "partitions": 1, "replication_factor": 2})
    answer = cluster.http(2).json("POST", "/v1/topics/over-tls/records?acks=all", headers=token,
                                  body={"records": [{"value": "hello", "partition": 0}]})
    assert answer["offsets"] == [{"partition": 0, "offset": 0}]
    for via in NODES:
        records = cluster.http(via).json("GET", "/v1/topics/over-tls/partitions/0/records?offset=0", headers=token)
        assert [r["value"] for r in records["records"]] == ["hello"]
        nodes = cluster.http(via).json("GET", "/v1/cluster", headers=token)["nodes"]
        assert {n["node_id"]: n["alive"] for n in nodes} == {1: True, 2: True}
    for node in cluster.nodes.values():
        assert not [line for line in node.stderr_lines if PLAINTEXT_WARNING in line]


def test_an_admin_a_grant_and_an_owner_written_into_etcd_let_no_one_in(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/users", expect=201, headers=token,
                         body={"username": "carol", "password": "carol-password-1", "role": "user"})
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "vault", "partitions": 1, "replication_factor": 2})
    carol = bearer(wait_until(lambda: login(cluster.http(2), "carol", "carol-password-1")))
    before = {n: rejected(cluster, n) for n in NODES}
    mallory = UserRecord("mallory", "admin", hash_password(FORGED_PASSWORD), 1)
    vault = cluster.http(1).json("GET", "/v1/topics/vault", headers=token)
    owned_by_carol = {"name": "vault", "topic_id": vault["topic_id"], "partitions": 1, "replication_factor": 2,
                      "kind": "topic", "config": {}, "owner": "carol", "created_ms": 1}
    write_into_etcd(cluster, {user_key("mallory").relative(): encode(mallory.to_json()),
                              acl_key("vault").relative(): encode({"carol": ["read", "write"]}),
                              topic_key("vault").relative(): encode(owned_by_carol)})
    for via in NODES:
        wait_until(lambda v=via: rejected(cluster, v) >= before[v] + 3)
        assert cluster.http(via).json("GET", "/v1/topics/vault", headers=token)["topic_id"] == vault["topic_id"]
        refused = cluster.http(via).call("POST", "/v1/auth/token",
                                         body={"username": "mallory", "password": FORGED_PASSWORD})
        assert refused.status == 401
        read = cluster.http(via).call("GET", "/v1/topics/vault/partitions/0/records?offset=0", headers=carol)
        assert read.status == 403
        users = [u["name"] for u in cluster.http(via).json("GET", "/v1/users", headers=token)["users"]]
        assert "mallory" not in users and "carol" in users
    for node in cluster.nodes.values():
        assert [line for line in node.stderr_lines if "users/mallory" in line and "seal" in line]


def test_a_plain_etcd_url_is_warned_about_in_the_nodes_log(tmp_path):
    with running_etcd(str(tmp_path / "etcd")) as etcd:
        assert etcd.url.startswith("etcd://")
        with NodeProcess(str(tmp_path / "node"), "--coordinator", etcd.url, "--lease-ttl-ms", "2000") as node:
            assert [line for line in node.stderr_lines if PLAINTEXT_WARNING in line], node.stderr_lines[-5:]


def test_a_half_configured_etcd_tls_set_stops_the_node_with_a_clear_error(tmp_path):
    ca = os.path.join(tmp_path, "etcd-ca.pem")
    node = NodeProcess(str(tmp_path / "node"), "--coordinator", "etcds://127.0.0.1:1", "--etcd-ca-file", ca)
    with pytest.raises(RuntimeError, match="exited with 2"):
        node.start(timeout_s=30)
    assert any("half configured" in line for line in node.stderr_lines)
