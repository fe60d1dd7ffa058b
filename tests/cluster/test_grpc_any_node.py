"""The public gRPC API on a real three-node cluster: every node lists its gRPC address, and any node
answers: a Publish sent to a node that does not lead the partition is stored by its leader, a
Subscribe through another node reads it, and a group subscription through a node that does not
coordinate groups joins, reads and commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tests.support.cluster import Cluster, running_cluster, wait_until
from tests.support.grpc_calls import pb, pb_grpc, publish, subscribe


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("grpc-cluster"))) as running:
        yield running



def metadata(token: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return (("authorization", token["Authorization"]),)


def test_every_node_lists_its_grpc_address(cluster: Cluster, token: dict[str, str]):
    nodes = cluster.http(2).json("GET", "/v1/cluster", headers=token)["nodes"]
    assert {n["node_id"]: n["grpc_address"] for n in nodes} == \
        {node_id: process.grpc_address for node_id, process in cluster.nodes.items()}


def test_publish_and_subscribe_through_nodes_that_do_not_lead(cluster: Cluster, token: dict[str, str]):
    topic = "grpc.anywhere"
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                         body={"name": topic, "partitions": 1, "replication_factor": 3})
    leader = wait_until(lambda: cluster.http(1).json("GET", f"/v1/topics/{topic}", headers=token)
                        ["partitions"][0]["leader"])
    writer, reader = [n for n in cluster.nodes if n != leader]
    answer = asyncio.run(publish(cluster.nodes[writer].grpc_address, pb.PublishRequest(
        topic=topic, acks="all", records=[pb.Record(value=f"a{n}".encode(), partition=0) for n in range(5)]),
        metadata(token)))
    assert [(p.partition, p.offset) for p in answer.positions] == [(0, n) for n in range(5)]
    described = cluster.http(leader).json("GET", f"/v1/topics/{topic}", headers=token)["partitions"][0]
    assert described["latest_offset"] == 5
    got = asyncio.run(subscribe(cluster.nodes[reader].grpc_address,
                                pb.SubscribeRequest(topic=topic, partition=0, offset=0), metadata(token), 5))
    assert [(r.offset, r.value) for r in got] == [(n, f"a{n}".encode()) for n in range(5)]


def test_a_group_subscription_through_a_node_that_does_not_coordinate_groups(cluster: Cluster,
                                                                              token: dict[str, str]):
    topic, group = "grpc.grouped.anywhere", "grpc.cluster.readers"
    cluster.http(1).json("POST", "/v1/topics", 201, headers=token,
                         body={"name": topic, "partitions": 2, "replication_factor": 2})
    cluster.http(1).json("POST", f"/v1/topics/{topic}/records?acks=all", headers=token,
                         body={"records": [{"value": f"g{n}", "partition": n % 2} for n in range(4)]})
    coordinator = wait_until(lambda: _offsets_leader(cluster, token))
    via = next(n for n in cluster.nodes if n != coordinator)

    async def read() -> list[Any]:
        async with grpc.aio.insecure_channel(cluster.nodes[via].grpc_address) as channel:
            call = pb_grpc.BrokerStub(channel).Subscribe(pb.SubscribeRequest(topic=topic, group=group),
                                                         metadata=metadata(token), timeout=30)
            out = [await call.read() for _ in range(4)]
            await asyncio.sleep(0.5)  # delivered records are counted once gRPC has taken them
            call.cancel()
            return out

    got = asyncio.run(read())
    assert sorted(r.value for r in got) == [f"g{n}".encode() for n in range(4)]

    def committed() -> list[tuple[int, int]] | None:
        described = cluster.http(coordinator).json("GET", f"/v1/groups/{group}", headers=token)
        offsets = sorted((o["partition"], o["committed_offset"]) for o in described["offsets"])
        return offsets if not described["members"] and offsets == [(0, 2), (1, 2)] else None

    assert wait_until(committed) == [(0, 2), (1, 2)]


def _offsets_leader(cluster: Cluster, token: dict[str, str]) -> int | None:
    """The node coordinating groups (the leader of ``__consumer_offsets``), once it exists."""
    reply = cluster.http(1).call("GET", "/v1/topics/__consumer_offsets", headers=token)
    if reply.status != 200:
        cluster.http(1).call("GET", "/v1/groups", headers=token)  # the first group call creates it
        return None
    leader = reply.json()["partitions"][0]["leader"]
    return int(leader) if leader is not None else None
