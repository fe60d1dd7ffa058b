"""The Kafka listener on a three-node cluster (real etcd, real processes), driven by librdkafka:
Metadata names every node and each partition's leader, replicas and ISR as the HTTP API does; an
idempotent ``acks=all`` producer writes through the kill of its partition's leader, and through a
pause (SIGSTOP past its lease, then SIGCONT) of it, and every record is stored once, in order; a
consumer group is coordinated by the node FindCoordinator names."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from segments.reader import SegmentReader, partition_directories
from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until
from tests.support.kafka import read_values

RECORDS = 300
PAUSED_RECORDS_MAX = 10_000  # the paused-leader writer's bound: 20 s at its pace
ACKED_STEP = 40  # acknowledgements awaited before the pause, after the failover and after the resume
FAILOVER_S = LEASE_TTL_MS / 1000 + 15


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("kafka-cluster")), extra=("--kafka-port", "0")) as running:
        yield running


def kafka(cluster: Cluster, via: int, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.nodes[via].kafka_address, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD, **extra}


def described(cluster: Cluster, via: int, token: dict[str, str], topic: str) -> list[dict[str, Any]]:
    partitions: list[dict[str, Any]] = cluster.http(via).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"]
    return partitions


def test_metadata_names_every_node_and_the_placement_http_shows(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "k-placed", "partitions": 3, "replication_factor": 3})
    wait_until(lambda: all(p["leader"] != -1 for p in described(cluster, 1, token, "k-placed")))
    listed = AdminClient(kafka(cluster, 2)).list_topics(timeout=20)
    assert {b.id: f"{b.host}:{b.port}" for b in listed.brokers.values()} == \
        {n: cluster.nodes[n].kafka_address for n in (1, 2, 3)}
    http = {p["partition"]: p for p in described(cluster, 1, token, "k-placed")}
    for index, partition in listed.topics["k-placed"].partitions.items():
        assert partition.leader == http[index]["leader"]
        assert sorted(partition.replicas) == sorted(http[index]["replicas"])
        assert sorted(partition.isrs) == sorted(http[index]["in_sync_replicas"])


def test_an_idempotent_producer_writes_through_a_leader_kill_once_and_in_order(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "k-failover", "partitions": 1, "replication_factor": 3})
    wait_until(lambda: described(cluster, 1, token, "k-failover")[0]["leader"] != -1)
    leader = described(cluster, 1, token, "k-failover")[0]["leader"]
    via = next(n for n in (1, 2, 3) if n != leader)
    producer = Producer(kafka(cluster, via, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                               "max.in.flight.requests.per.connection": 1,
                                               "message.timeout.ms": 60_000}))
    failed: list[Any] = []
    done = threading.Event()

    def write() -> None:
        for i in range(RECORDS):
            producer.produce("k-failover", value=b"r%d" % i, partition=0,
                             on_delivery=lambda err, _msg: failed.append(err) if err else None)
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(90)
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(RECORDS * 0.01 / 3)  # a third of the records written
    os.kill(cluster.nodes[leader].pid, signal.SIGKILL)
    cluster.nodes[leader].kill()
    assert done.wait(timeout=LEASE_TTL_MS / 1000 + 100), "the producer did not finish"
    assert failed == []
    values = []
    offset = 0
    while True:
        got = cluster.http(via).json("GET", f"/v1/topics/k-failover/partitions/0/records?offset={offset}",
                                     headers=token)
        values += [r["value"] for r in got["records"]]
        if not got["records"]:
            break
        offset = got["next_offset"]
    assert values == [f"r{i}" for i in range(RECORDS)], "every record once, in order"
    cluster.start(leader)


def test_an_idempotent_producer_writes_through_a_paused_leader_once_and_in_order(cluster: Cluster):
    """The leader is paused (SIGSTOP) under an idempotent ``acks=all`` producer until another node
    leads (its lease lapsed), the writes go on through that one, then it resumes (SIGCONT) with the
    producer's requests in its socket and the belief that it leads: it steps down and rejoins the
    ISR, and every acknowledged record is stored once, at its acknowledged offset, in the order sent."""
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    wait_until(lambda: all(n["alive"] for n in cluster.http(1).json("GET", "/v1/cluster", headers=token)["nodes"]))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "k-paused", "partitions": 1, "replication_factor": 3})
    start = wait_until(lambda: (p := described(cluster, 1, token, "k-paused")[0])["leader"] != -1
                       and len(p["in_sync_replicas"]) == 3 and p)
    paused = start["leader"]
    via = next(n for n in (1, 2, 3) if n != paused)
    # Requests stuck at the paused leader time out after 3 s (not librdkafka's 60) and are sent again
    # with their sequence numbers to whoever leads by then.
    producer = Producer(kafka(cluster, via, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                               "socket.timeout.ms": 3_000, "request.timeout.ms": 3_000,
                                               "topic.metadata.refresh.interval.ms": 1_000,
                                               "message.timeout.ms": 60_000}))
    acked: list[tuple[int, bytes]] = []  # (offset, value) of every delivery reported without error
    failed: list[Any] = []
    stop = threading.Event()
    done = threading.Event()

    def report(err: Any, message: Any) -> None:
        if err:
            failed.append(err)
        else:
            acked.append((message.offset(), message.value()))

    def write() -> None:
        for i in range(PAUSED_RECORDS_MAX):
            if stop.is_set():
                break
            producer.produce("k-paused", value=b"p%d" % i, partition=0, on_delivery=report)
            producer.poll(0)
            if i % 5 == 4:  # 500 records a second: batches in flight, some replicated but unanswered at the pause
                time.sleep(0.01)
        producer.flush(90)
        done.set()

    def more_acked(count: int, timeout_s: float) -> None:
        before = len(acked)
        wait_until(lambda: len(acked) >= before + count, timeout_s=timeout_s)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        more_acked(ACKED_STEP, FAILOVER_S)
        os.kill(cluster.nodes[paused].pid, signal.SIGSTOP)
        try:
            new = wait_until(lambda: (p := described(cluster, via, token, "k-paused")[0])["leader"]
                             not in (paused, -1) and p, timeout_s=FAILOVER_S)
            assert new["leader_epoch"] > start["leader_epoch"]
            more_acked(ACKED_STEP, FAILOVER_S)  # through the new leader, the old one still paused
        finally:
            os.kill(cluster.nodes[paused].pid, signal.SIGCONT)
        more_acked(ACKED_STEP, FAILOVER_S)
    finally:
        stop.set()
        assert done.wait(timeout=120), "the producer did not finish"
    assert failed == []
    # Settled: the resumed node is in the ISR again and its copy is the leader's.
    final = wait_until(lambda: (p := described(cluster, via, token, "k-paused")[0])["leader"] != -1
                       and sorted(p["in_sync_replicas"]) == sorted(p["replicas"])
                       and p["latest_offset"] == p["log_end_offset"] and p, timeout_s=FAILOVER_S)
    stored = final["latest_offset"]
    consumer = Consumer(kafka(cluster, via, **{"group.id": "k-paused-check", "enable.auto.commit": False}))
    values = read_values(consumer, "k-paused", 0, stored, timeout_s=30)
    assert len(values) == stored
    over_http = []
    while len(over_http) < stored:  # bounded: each page holds at least one record or the loop fails
        got = cluster.http(via).json("GET", f"/v1/topics/k-paused/partitions/0/records?offset={len(over_http)}",
                                     headers=token)
        assert got["records"], (len(over_http), stored)
        over_http += [r["value"].encode() for r in got["records"]]
    assert over_http == values
    resumed = partition_directories(cluster.nodes[paused].data_dir, "k-paused")[0]
    wait_until(lambda: [r.value for r in SegmentReader(resumed).iter_records()] == values,  # no tail of its own
               timeout_s=FAILOVER_S)
    # Every record acknowledged (none failed): each stored once, in the order sent, and where its
    # acknowledgement said (a retried batch stored again, or a write the resumed node took, would not be).
    assert len(acked) >= 3 * ACKED_STEP
    assert values == [b"p%d" % i for i in range(len(acked))], "every record once, in the order sent"
    assert all(offset < stored and values[offset] == value for offset, value in acked), "acknowledged elsewhere"


def test_a_group_is_coordinated_by_the_node_find_coordinator_names(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "k-grouped", "partitions": 2, "replication_factor": 2})
    wait_until(lambda: all(p["leader"] != -1 for p in described(cluster, 1, token, "k-grouped")))
    producer = Producer(kafka(cluster, 1))
    for i in range(10):
        producer.produce("k-grouped", value=b"g%d" % i, partition=i % 2)
    assert producer.flush(20) == 0
    consumer = Consumer(kafka(cluster, 3, **{"group.id": "k-readers", "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False}))
    try:
        consumer.subscribe(["k-grouped"])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        assert sorted(seen) == sorted(b"g%d" % i for i in range(10))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    group = cluster.http(2).json("GET", "/v1/groups/k-readers", headers=token)
    assert sorted((o["partition"], o["committed_offset"]) for o in group["offsets"]) == [(0, 5), (1, 5)]


def _admin_call(cluster: Cluster, via: int, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """One request to node ``via``'s Kafka listener as the admin, raw (kio frames, SASL PLAIN)."""
    from tests.kafka_api.test_listener import encode_body, raw_connection, send_request
    with raw_connection(cluster.nodes[via]) as sock:
        sock.settimeout(20)
        send_request(sock, 17, 1, encode_body(17, 1, {"mechanism": "PLAIN"}))
        send_request(sock, 36, 2, encode_body(36, 2, {"auth_bytes": f"\x00{ADMIN}\x00{ADMIN_PASSWORD}".encode()}))
        return send_request(sock, api_key, version, encode_body(api_key, version, values))


def _fetch_by_id(cluster: Cluster, via: int, topic_id: uuid.UUID) -> Any:
    (topic,) = _admin_call(cluster, via, 1, 16, {
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1_000_000, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                           "partition_max_bytes": 1_000_000}]}]}).responses
    return topic.partitions[0]


def test_every_node_knows_a_topic_by_its_id_and_forgets_the_id_when_it_is_made_again(cluster: Cluster):
    """Topic ids through each node's etcd cache (decision 0398): Metadata on every node answers the
    id HTTP shows, Fetch v16 by id reads through any node (forwarded to the leader), and once the
    topic is deleted and made again no node reads it through the old id."""
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))

    def make(values: list[str]) -> uuid.UUID:
        cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                             body={"name": "k-ids", "partitions": 1, "replication_factor": 2})
        wait_until(lambda: all(p["leader"] != -1 for p in described(cluster, 1, token, "k-ids")))
        cluster.http(1).json("POST", "/v1/topics/k-ids/records", headers=token,
                             body={"records": [{"value": v, "partition": 0} for v in values]})
        return uuid.UUID(hex=cluster.http(1).json("GET", "/v1/topics/k-ids?offsets=false", headers=token)["topic_id"])

    old_id = make(["old"])
    for via in (1, 2, 3):
        wait_until(lambda: _fetch_by_id(cluster, via, old_id).error_code.value == 0)  # noqa: B023
        (meta,) = _admin_call(cluster, via, 3, 12, {"topics": [{"name": None, "topic_id": old_id}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False}).topics
        assert (meta.error_code.value, meta.name, meta.topic_id) == (0, "k-ids", old_id)
        assert b"old" in _fetch_by_id(cluster, via, old_id).records
    cluster.http(1).call("DELETE", "/v1/topics/k-ids", headers=token)
    new_id = make(["new"])
    for via in (1, 2, 3):
        wait_until(lambda: _fetch_by_id(cluster, via, new_id).error_code.value == 0)  # noqa: B023
        stale = _fetch_by_id(cluster, via, old_id)
        assert (stale.error_code.value, stale.records) == (100, b""), f"node {via} read through the old id"
        assert b"new" in _fetch_by_id(cluster, via, new_id).records
