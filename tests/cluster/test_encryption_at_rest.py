"""Encryption at rest on a three-node cluster (decision 0316): followers copy the leader's sealed
batches byte for byte, no node's segment files hold the records in the clear, a read through any
node (forwarded to the leader) gets records, and after the leader is killed the new leader opens
what the old one sealed, with the same key ring."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from segments.batch import iter_batches
from segments.encryption import sealing_key
from segments.key_ring import KeyRing, new_key, write_ring
from tests.support.cluster import Cluster, running_cluster, wait_until

TOPIC = "sealed"
MARK = "CLUSTER-SECRET"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("crypt")
    keys = str(root / "ring")
    write_ring(keys, KeyRing({1: new_key()}, 1))
    with running_cluster(str(root), extra=("--encryption-keys-file", keys)) as running:
        yield running


def _partition(cluster: Cluster, via: int, token: dict[str, str]) -> dict[str, object]:
    partition: dict[str, object] = cluster.http(via).json("GET", f"/v1/topics/{TOPIC}", headers=token)["partitions"][0]
    return partition


def _stored(cluster: Cluster, node_id: int) -> bytes:
    files = sorted(glob.glob(os.path.join(cluster.root, f"node-{node_id}", f"{TOPIC}-0", "*.log")))
    return b"".join(Path(f).read_bytes() for f in files)


def _values(cluster: Cluster, via: int, token: dict[str, str]) -> list[str]:
    body = cluster.http(via).json("GET", f"/v1/topics/{TOPIC}/partitions/0/records?offset=0", headers=token)
    return [r["value"] for r in body["records"]]


def test_followers_hold_the_leaders_ciphertext_and_a_new_leader_opens_it(cluster: Cluster,
                                                                         token: dict[str, str]) -> None:
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": TOPIC, "partitions": 1, "replication_factor": 3})
    placed = wait_until(lambda: (p := _partition(cluster, 1, token)) and p["leader"] != -1
                        and len(list(p["in_sync_replicas"])) == 3 and p)  # type: ignore[call-overload]
    leader = placed["leader"]
    assert isinstance(leader, int)
    sent = [f"{MARK}-{i}" for i in range(30)]
    cluster.http(1).json("POST", f"/v1/topics/{TOPIC}/records?acks=all", headers=token,
                         body={"records": [{"value": v} for v in sent]})
    for via in (1, 2, 3):
        assert _values(cluster, via, token) == sent
    wait_until(lambda: len({len(_stored(cluster, n)) for n in (1, 2, 3)}) == 1)
    copies = {n: _stored(cluster, n) for n in (1, 2, 3)}
    assert copies[1] == copies[2] == copies[3]  # replication copies the sealed bytes as they are
    assert MARK.encode() not in copies[1]
    assert {sealing_key(copies[1][p:p + h.size_bytes]) for p, h in iter_batches(copies[1])} == {1}

    cluster.nodes[leader].kill()
    survivors = [n for n in (1, 2, 3) if n != leader]
    wait_until(lambda: (p := _partition(cluster, survivors[0], token)) and p["leader"] in survivors)
    more = [f"{MARK}-after"]
    cluster.http(survivors[0]).json("POST", f"/v1/topics/{TOPIC}/records?acks=1", headers=token,
                                    body={"records": [{"value": v} for v in more]})
    assert wait_until(lambda: _values(cluster, survivors[1], token) == sent + more)
