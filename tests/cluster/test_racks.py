"""Racks on a real cluster (nodes 1 and 2 in rack a, node 3 in rack b): replicas spread over the
racks, a reader in rack b is served by rack b's in-sync replica (the leader serves nothing), never
past that replica's high watermark, and falls back to the leader when that replica stops; a Kafka
reader naming its rack is sent by the leader to rack b's replica and reads from it directly (KIP-392)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import Iterator

import aiohttp
import pytest
from confluent_kafka import Consumer

from logbroker.client import Client
from tests.support.auth import ADMIN, ADMIN_PASSWORD
from tests.support.cluster import Cluster, running_cluster, wait_until
from tests.support.grpc_calls import pb, subscribe
from tests.support.kafka import read_values

RACKS = {1: "a", 2: "a", 3: "b"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("racks")), racks=RACKS, extra=("--kafka-port", "0")) as running:
        yield running



def bytes_out(cluster: Cluster, node: int, topic: str, token: dict[str, str]) -> float:
    text = cluster.http(node).call("GET", "/metrics", headers=token).data.decode()
    match = re.search(rf'^logbroker_bytes_out_total{{topic="{re.escape(topic)}"}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def read_all(cluster: Cluster, via: int, topic: str, partition: int, *, rack: str | None,
             timeout_s: float = 60.0) -> int:
    """The next offset after reading ``partition`` from 0 to its end with the Python client."""
    async def run() -> int:
        async with Client(cluster.nodes[via].url, username=ADMIN, password=ADMIN_PASSWORD, client_rack=rack,
                          timeout_s=timeout_s) as client:
            offset = 0
            while True:
                fetched = await client.fetch_batches(topic, partition, offset)
                if fetched.next_offset == offset:
                    return offset
                offset = fetched.next_offset
    return asyncio.run(run())


def test_replicas_spread_over_the_racks(cluster: Cluster, token: dict[str, str]):
    for name, rf in (("racked.rf2", 2), ("racked.rf3", 3)):
        cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                             body={"name": name, "partitions": 4, "replication_factor": rf})
        for p in cluster.http(1).json("GET", f"/v1/topics/{name}", headers=token)["partitions"]:
            assert {RACKS[n] for n in p["replicas"]} == {"a", "b"}, p  # both racks, whatever the factor
    nodes = cluster.http(2).json("GET", "/v1/cluster", headers=token)["nodes"]
    assert {n["node_id"]: n["rack"] for n in nodes} == RACKS


def test_a_reader_in_rack_b_reads_from_rack_bs_replica_and_falls_back_to_the_leader(cluster: Cluster,
                                                                                      token: dict[str, str]):
    topic = "racked.reads"
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                         body={"name": topic, "partitions": 3, "replication_factor": 2})
    partitions = cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"]
    chosen = next(p for p in partitions if p["leader"] != 3 and 3 in p["in_sync_replicas"])
    partition, leader = chosen["partition"], chosen["leader"]
    for n in range(20):
        cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=all", headers=token,
                             body={"records": [{"value": f"r{n}", "partition": partition}]})
    rack_read = f"/v1/topics/{topic}/partitions/{partition}/records?offset=0&rack=b"
    # A follower learns the high watermark from the leader's next shipment (within 0.5 s when
    # idle): until then it serves less than the leader would, never more.
    wait_until(lambda: cluster.http(3).json("GET", rack_read, headers=token)["high_watermark"] == 20)
    before_leader, before_b = bytes_out(cluster, leader, topic, token), bytes_out(cluster, 3, topic, token)
    assert read_all(cluster, leader, topic, partition, rack="b") == 20  # bootstrapped at the leader even
    assert bytes_out(cluster, leader, topic, token) == before_leader  # the leader served nothing
    assert bytes_out(cluster, 3, topic, token) > before_b
    # Through HTTP with ?rack=b, from any node: rack b's copy, up to its high watermark.
    answer = cluster.http(1).json("GET", rack_read, headers=token)
    assert [r["value"] for r in answer["records"]] == [f"r{n}" for n in range(20)]
    assert bytes_out(cluster, leader, topic, token) == before_leader
    # Without a rack the leader serves (what makes the two counters above a proof).
    assert read_all(cluster, 3, topic, partition, rack=None) == 20
    assert bytes_out(cluster, leader, topic, token) > before_leader
    # Rack b's replica stopped: the reader falls back to the leader, which also has what was
    # written since (acks=1: the stopped replica cannot have it).
    for n in range(20, 25):
        cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=1", headers=token,
                             body={"records": [{"value": f"r{n}", "partition": partition}]})
    pid = cluster.nodes[3].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert read_all(cluster, leader, topic, partition, rack="b", timeout_s=3) == 25
        assert time.monotonic() - started < 30
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_bad_rack_is_refused(cluster: Cluster, token: dict[str, str]):
    for bad in ("b%00", "x" * 101, "%1b%5b31m"):
        reply = cluster.http(1).call("GET", f"/v1/topics/racked.rf2/partitions/0/records?offset=0&rack={bad}",
                                     headers=token)
        assert reply.status == 400, bad


def racked_topic(cluster: Cluster, token: dict[str, str], topic: str, *, partitions: int, records: int) -> list[dict]:
    """A new RF 2 topic with ``records`` records (``acks=all``) in each partition, once every
    partition's rack b replica holds them and a rack b read through a leader in rack a leaves that
    leader's counter alone (node 3 alive and in sync in its cache): the partitions."""
    # A test before may have paused node 3 past its lease: placement needs it alive again to
    # give every partition a replica in rack b.
    wait_until(lambda: all(n["alive"] for n in cluster.http(1).json("GET", "/v1/cluster", headers=token)["nodes"]))
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                         body={"name": topic, "partitions": partitions, "replication_factor": 2})
    for p in range(partitions):
        cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=all", headers=token,
                             body={"records": [{"value": f"p{p}-{n}", "partition": p} for n in range(records)]})
    described = cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"]
    for p in described:
        rack_read = f"/v1/topics/{topic}/partitions/{p['partition']}/records?offset=0&rack=b"
        wait_until(lambda read=rack_read: cluster.http(3).json("GET", read, headers=token)["high_watermark"] == records)

        def served_in_rack_b(leader: int = p["leader"], read: str = rack_read) -> bool:
            was = bytes_out(cluster, leader, topic, token)
            cluster.http(leader).json("GET", read, headers=token)
            return bytes_out(cluster, leader, topic, token) == was

        if p["leader"] != 3:
            wait_until(served_in_rack_b)
    return described


def metadata(token: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return (("authorization", token["Authorization"]),)


def rack_a_bytes_out(cluster: Cluster, topic: str, token: dict[str, str]) -> float:
    return sum(bytes_out(cluster, n, topic, token) for n, rack in RACKS.items() if rack == "a")


def test_a_grpc_subscriber_with_a_rack_reads_from_that_racks_replica(cluster: Cluster, token: dict[str, str]):
    topic = "racked.grpc"
    partitions = racked_topic(cluster, token, topic, partitions=2, records=5)
    chosen = next(p for p in partitions if p["leader"] != 3)
    partition, leader = chosen["partition"], chosen["leader"]
    before = bytes_out(cluster, leader, topic, token)
    request = pb.SubscribeRequest(topic=topic, partition=partition, offset=0, rack="b")
    got = asyncio.run(subscribe(cluster.nodes[leader].grpc_address, request, metadata(token), 5))
    assert [r.value for r in got] == [f"p{partition}-{n}".encode() for n in range(5)]
    assert bytes_out(cluster, leader, topic, token) == before


def test_push_streams_and_a_grpc_group_member_with_a_rack_read_from_that_racks_replicas(cluster: Cluster,
                                                                                         token: dict[str, str]):
    topic = "racked.pushed"
    partitions = racked_topic(cluster, token, topic, partitions=3, records=4)
    assert any(p["leader"] != 3 for p in partitions)  # else rack a would serve nothing either way
    chosen = next(p for p in partitions if p["leader"] != 3)
    before = rack_a_bytes_out(cluster, topic, token)

    async def sse(path: str, count: int) -> list[dict]:
        events = []
        async with aiohttp.ClientSession() as session, \
                session.get(cluster.nodes[chosen["leader"]].url + path, headers=token,
                            timeout=aiohttp.ClientTimeout(total=20)) as response:
            assert response.status == 200, await response.text()
            async for line in response.content:
                if line.startswith(b"data:"):
                    event = json.loads(line[5:])
                    if "value" in event:
                        events.append(event)
                if len(events) == count:
                    return events
        return events

    pushed = asyncio.run(sse(f"/v1/topics/{topic}/partitions/{chosen['partition']}/stream?offset=0&rack=b", 4))
    assert [e["value"] for e in pushed] == [f"p{chosen['partition']}-{n}" for n in range(4)]
    # A group member's push stream, behind a gRPC Subscribe with a group: every partition.
    request = pb.SubscribeRequest(topic=topic, group="racked.readers", rack="b")
    got = asyncio.run(subscribe(cluster.nodes[chosen["leader"]].grpc_address, request, metadata(token), 12))
    assert sorted(r.value for r in got) == sorted(f"p{p}-{n}".encode() for p in range(3) for n in range(4))
    assert rack_a_bytes_out(cluster, topic, token) == before
    # Without a rack the leaders serve (what makes the counter above a proof).
    asyncio.run(sse(f"/v1/topics/{topic}/partitions/{chosen['partition']}/stream?offset=0", 4))
    assert rack_a_bytes_out(cluster, topic, token) > before


def test_a_kafka_reader_in_rack_b_is_sent_to_rack_bs_replica(cluster: Cluster, token: dict[str, str]):
    """The leader answers a Fetch naming rack b with ``preferred_read_replica`` 3 and no records;
    librdkafka then fetches from node 3, which serves its copy: node 3's Kafka listener sees the
    reader's fetches, the leader's only its first."""
    topic = "racked.kafka"
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                         body={"name": topic, "partitions": 3, "replication_factor": 2})
    partitions = cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"]
    chosen = next(p for p in partitions if p["leader"] != 3 and 3 in p["in_sync_replicas"])
    partition, leader = chosen["partition"], chosen["leader"]
    cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=all", headers=token,
                         body={"records": [{"value": f"k{n}", "partition": partition} for n in range(20)]})
    rack_read = f"/v1/topics/{topic}/partitions/{partition}/records?offset=0&rack=b"
    wait_until(lambda: cluster.http(3).json("GET", rack_read, headers=token)["high_watermark"] == 20)
    logs: list[str] = []

    class Lines:
        def log(self, _level: int, message: str, *args: object) -> None:
            logs.append(message % args if args else message)

    consumer = Consumer({"bootstrap.servers": cluster.nodes[leader].kafka_address,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                         "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD, "group.id": "racked-kafka",
                         "enable.auto.commit": False, "client.rack": "b", "debug": "fetch", "logger": Lines()})
    assert read_values(consumer, topic, partition, 20, 30) == [b"k%d" % n for n in range(20)]
    assert any("preferred" in line.lower() and "3" in line for line in logs), logs[-20:]
