"""gRPC group subscriptions call the group coordinator directly (decision 0346).

An in-process node serves gRPC with no HTTP listener at all: the HTTP address it advertises refuses
every connection, its own included, and a group subscriber still joins, reads its partitions,
commits what it got and leaves. A call passed on to the node that coordinates groups relays its
records, and its refusal with the same code and retry advice; a node that cannot be reached is a
retriable refusal."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import grpc
import pytest

from coordinator.models import NodeInfo
from grpc_api.errors import CODE_KEY, RETRY_KEY, status_details
from grpc_api.groups import _relayed
from grpc_api.server import GrpcServer
from logbroker.config import NodeConfig
from logbroker.errors import NoLeaderError, NotAvailableError, RemoteError
from logbroker.node import Node
from tests.support.grpc_calls import pb, pb_grpc, publish

DEADLINE_S = 20.0


def refusing_port() -> int:
    """A loopback port nothing listens on (bound for a moment to pick it, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def refuses(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.asyncio
async def test_a_group_subscription_works_with_no_http_listener(tmp_path):
    http_port = refusing_port()
    config = NodeConfig(data_dir=str(tmp_path / "node"), auth="off", rpc_port=0, grpc_port=0)
    node, server = Node(config), GrpcServer(config)
    address = f"127.0.0.1:{server.port}"
    await node.start(http_url=f"http://127.0.0.1:{http_port}", grpc_address=address)
    try:
        await server.start(node)
        await node.topics.create_topic({"name": "grouped", "partitions": 2})
        await publish(address, pb.PublishRequest(topic="grouped", records=[
            pb.Record(value=f"v{n}".encode(), partition=n % 2) for n in range(6)]))
        async with grpc.aio.insecure_channel(address) as channel:
            call = pb_grpc.BrokerStub(channel).Subscribe(pb.SubscribeRequest(topic="grouped", group="readers"),
                                                         timeout=DEADLINE_S)
            got = [await call.read() for _ in range(6)]
            await asyncio.sleep(0.5)  # delivered once gRPC has taken them
            call.cancel()
        assert sorted(r.value for r in got) == [f"v{n}".encode() for n in range(6)]
        described: dict[str, Any] = {}
        for _ in range(100):  # the call's end commits and leaves
            described = node.groups.describe("readers")
            if not described["members"] and len(described["offsets"]) == 2:
                break
            await asyncio.sleep(0.1)
        assert described["members"] == []
        assert sorted((o["partition"], o["committed_offset"]) for o in described["offsets"]) == [(0, 3), (1, 3)]
        assert refuses(http_port)
    finally:
        await server.stop()
        await node.stop()


class PassingContext:
    """The gRPC context of a call this node passes on: its metadata, and whether it was opened."""

    def __init__(self) -> None:
        self.opened = False

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def send_initial_metadata(self, _metadata: Any) -> None:
        self.opened = True


@pytest.mark.asyncio
async def test_a_call_passed_on_relays_the_records_and_the_refusals_of_the_coordinating_node(tmp_path):
    """A node's own listener stands in for the node that coordinates groups (it serves the call
    itself, being a single node): what the passing side sends, relays and raises is what a cluster
    node's would be."""
    config = NodeConfig(data_dir=str(tmp_path / "node"), auth="off", rpc_port=0, grpc_port=0)
    node, server = Node(config), GrpcServer(config)
    address = f"127.0.0.1:{server.port}"
    await node.start(grpc_address=address)
    try:
        await server.start(node)
        assert server.service is not None
        groups = server.service._groups
        caller = await node.auth.authenticate(None)
        coordinating = NodeInfo(9, "http://127.0.0.1:1", "127.0.0.1:1", grpc_address=address)
        await node.topics.create_topic({"name": "relayed", "partitions": 2})
        await publish(address, pb.PublishRequest(topic="relayed", records=[
            pb.Record(value=f"v{n}".encode(), partition=n % 2) for n in range(4)]))
        context = PassingContext()
        relayed = groups._pass_on(pb.SubscribeRequest(topic="relayed", group="relayed.g"), coordinating, context,
                                  *caller)
        got: list[bytes] = []
        async with asyncio.timeout(DEADLINE_S):
            while len(got) < 4:
                got += [r.value for r in await anext(relayed)]
        await relayed.aclose()
        assert sorted(got) == [b"v0", b"v1", b"v2", b"v3"] and context.opened
        for _ in range(100):  # the coordinating side saw the call end: its member left
            if not node.groups.describe("relayed.g")["members"]:
                break
            await asyncio.sleep(0.1)
        assert node.groups.describe("relayed.g")["members"] == []

        context = PassingContext()
        refused = groups._pass_on(pb.SubscribeRequest(topic="nowhere", group="relayed.g"), coordinating, context,
                                  *caller)
        with pytest.raises(RemoteError) as unknown:
            await anext(refused)
        assert (unknown.value.code, unknown.value.retriable) == ("unknown_topic", False) and not context.opened

        away = NodeInfo(9, "http://127.0.0.1:1", "127.0.0.1:1", grpc_address=f"127.0.0.1:{refusing_port()}")
        with pytest.raises(NoLeaderError):
            await anext(groups._pass_on(pb.SubscribeRequest(topic="relayed", group="relayed.g"), away,
                                        PassingContext(), *caller))
    finally:
        await server.stop()
        await node.stop()


def test_a_relayed_refusal_keeps_its_code_and_retry_advice():
    _, message, trailing = status_details("too_many_requests", "slow down", retriable=True, retry_after_s=2.5)
    error = _relayed(grpc.StatusCode.RESOURCE_EXHAUSTED, message, trailing, "node-2:9092", opened=False)
    assert isinstance(error, RemoteError) and error.code == "too_many_requests" and error.retriable
    assert error.extra == {"retry_after_s": 2.5} and str(error) == "slow down"
    assert status_details(error.code, str(error), retriable=error.retriable, **error.extra) == \
        status_details("too_many_requests", "slow down", retriable=True, retry_after_s=2.5)
    _, message, trailing = status_details("forbidden", "not yours")
    error = _relayed(grpc.StatusCode.PERMISSION_DENIED, message, trailing, "node-2:9092", opened=True)
    assert isinstance(error, RemoteError) and (error.code, error.retriable, error.extra) == ("forbidden", False, {})
    assert dict(trailing).get(CODE_KEY) == "forbidden" and RETRY_KEY not in dict(trailing)


def test_a_coordinator_that_cannot_be_reached_or_goes_away_is_retriable():
    unreachable = _relayed(grpc.StatusCode.UNAVAILABLE, "connection refused", (), "node-2:9092", opened=False)
    assert isinstance(unreachable, NoLeaderError) and unreachable.retriable
    gone = _relayed(grpc.StatusCode.INTERNAL, "stream reset", (), "node-2:9092", opened=True)
    assert isinstance(gone, NotAvailableError) and gone.retriable
