"""A compacted topic on a three-node cluster (decisions 0321, 0323): every replica compacts its
own log, and all of them end up holding the same latest record per key, each at the offset it was
written at (compared by key, straight from each node's segment files)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from segments.reader import SegmentReader
from tests.support.cluster import Cluster, running_cluster, wait_until
from tests.support.nodes import SMALL_SEGMENTS

TOPIC = "changelog"
WRITES = 80
KEYS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("compacted")), extra=SMALL_SEGMENTS) as running:
        yield running


def _stored(cluster: Cluster, node_id: int) -> list[tuple[int, str, str | None]]:
    reader = SegmentReader(os.path.join(cluster.root, f"node-{node_id}", f"{TOPIC}-0"))
    return [(r.offset, (r.key or b"").decode(), None if r.value is None else r.value.decode())
            for r in reader.iter_records(reader.log_start_offset())]


def _by_key(stored: list[tuple[int, str, str | None]]) -> dict[str, tuple[int, str | None]]:
    return {key: (offset, value) for offset, key, value in stored}


def test_every_replica_compacts_and_all_converge_by_key(cluster: Cluster, token: dict[str, str]) -> None:
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token, body={
        "name": TOPIC, "partitions": 1, "replication_factor": 3,
        "config": {"cleanup_policy": "compact", "segment_bytes": 1024, "min_cleanable_dirty_ratio": 0.01}})
    wait_until(lambda: len(cluster.http(1).json("GET", f"/v1/topics/{TOPIC}", headers=token)
                           ["partitions"][0]["in_sync_replicas"]) == 3)
    expected: dict[str, tuple[int, str | None]] = {}
    for i in range(WRITES):
        key, value = f"k{i % KEYS}", (None if i == WRITES - KEYS else f"{i:03d}" + "x" * 60)
        reply = cluster.http(1).json("POST", f"/v1/topics/{TOPIC}/records?acks=all", headers=token,
                                     body={"records": [{"key": key, "value": value}]})
        expected[key] = (reply["offsets"][0]["offset"], value)
    # Each node compacts on its own: wait until every replica dropped most superseded records.
    wait_until(lambda: all(len(_stored(cluster, n)) < WRITES // 2 for n in (1, 2, 3)), timeout_s=60)
    stored = {n: _stored(cluster, n) for n in (1, 2, 3)}
    for node_id, records in stored.items():
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)), node_id
        for offset, _key, value in records:  # every kept record is where it was written
            assert value is None or value.startswith(f"{offset:03d}"), (node_id, offset)
        assert _by_key(records) == expected, node_id


def test_a_follower_that_was_down_catches_up_across_the_leaders_gaps(cluster: Cluster,
                                                                     token: dict[str, str]) -> None:
    topic = "catchup"
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token, body={
        "name": topic, "partitions": 1, "replication_factor": 3,
        "config": {"cleanup_policy": "compact", "segment_bytes": 1024, "min_cleanable_dirty_ratio": 0.01}})
    placed = wait_until(lambda: (p := cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)
                                 ["partitions"][0]) and len(p["in_sync_replicas"]) == 3 and p)
    leader = placed["leader"]
    victim = next(n for n in (1, 2, 3) if n != leader)
    expected: dict[str, tuple[int, str | None]] = {}

    def write(i: int, acks: str) -> None:
        key, value = f"k{i % KEYS}", f"{i:03d}" + "x" * 60
        reply = cluster.http(leader).json("POST", f"/v1/topics/{topic}/records?acks={acks}", headers=token,
                                          body={"records": [{"key": key, "value": value}]})
        expected[key] = (reply["offsets"][0]["offset"], value)

    for i in range(5):
        write(i, "all")
    cluster.nodes[victim].kill()
    for i in range(5, WRITES):
        write(i, "1")

    def stored(node_id: int) -> list[tuple[int, str, str | None]]:
        reader = SegmentReader(os.path.join(cluster.root, f"node-{node_id}", f"{topic}-0"))
        return [(r.offset, (r.key or b"").decode(), None if r.value is None else r.value.decode())
                for r in reader.iter_records(reader.log_start_offset())]

    wait_until(lambda: len(stored(leader)) < WRITES // 2, timeout_s=60)  # the leader compacted meanwhile
    cluster.start(victim)
    wait_until(lambda: _by_key(stored(victim)) == expected, timeout_s=60)
    wait_until(lambda: len(cluster.http(leader).json("GET", f"/v1/topics/{topic}", headers=token)
                           ["partitions"][0]["in_sync_replicas"]) == 3, timeout_s=60)
