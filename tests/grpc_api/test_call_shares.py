"""Shares of a node's gRPC call slots against a real node with small limits: half-open calls (headers
sent, the request never) from one address cannot take the slots other callers need; a call without
a valid token is refused at once, before any request; a call whose request does not come ends
DEADLINE_EXCEEDED after ``grpc_request_timeout_ms`` and frees its slot; a request that is not the
method's message is INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from grpc_api import stubs
from tests.grpc_api.conftest import auth
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.grpc_calls import publish, subscribe
from tests.support.half_open import HalfOpenConnection
from tests.support.nodes import NodeProcess

pb, pb_grpc = stubs.load()
CALLS_MAX, RESERVED, PER_CONNECTION, PER_ADDRESS, PER_USER = 40, 10, 8, 16, 24
REQUEST_TIMEOUT_MS = 2500
AT_ONCE_S = REQUEST_TIMEOUT_MS / 1000 / 2  # a refusal "at once" comes well before the request deadline
PUBLISH = "/logbroker.v1.Broker/Publish"
TOPIC = "shares.orders"


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("grpc-shares")), *AUTH_ARGS,
                     "--grpc-calls-max", str(CALLS_MAX), "--grpc-calls-reserved", str(RESERVED),
                     "--grpc-calls-per-connection-max", str(PER_CONNECTION),
                     "--grpc-calls-per-address-max", str(PER_ADDRESS), "--grpc-calls-per-user-max", str(PER_USER),
                     "--grpc-request-timeout-ms", str(REQUEST_TIMEOUT_MS)) as process:
        yield process


@pytest.fixture(scope="module")
def tokens(node) -> dict[str, str]:
    """The admin's token, and a user's (the topic's reader and writer)."""
    http = Http(node.url)
    admin = login(http, ADMIN, ADMIN_PASSWORD)
    http.json("POST", "/v1/topics", 201, body={"name": TOPIC, "partitions": 1}, headers=bearer(admin))
    http.json("POST", "/v1/users", 201, body={"username": "mallory", "password": "mallory-password"},
              headers=bearer(admin))
    return {"admin": admin, "mallory": login(http, "mallory", "mallory-password")}


@contextlib.asynccontextmanager
async def half_open(node: NodeProcess, source: str, calls: int, authorization: str | None
                    ) -> AsyncIterator[list[HalfOpenConnection]]:
    """``calls`` half-open Publish calls from ``source``, on as many connections as the node's
    per-connection bound needs."""
    host, port = node.grpc_address.rsplit(":", 1)
    async with contextlib.AsyncExitStack() as stack:
        connections = [await stack.enter_async_context(HalfOpenConnection(host, int(port), source))
                       for _ in range(-(-calls // PER_CONNECTION))]
        for n in range(calls):
            await connections[n // PER_CONNECTION].open_call(PUBLISH, authorization)
        yield connections


def still_open(connections: list[HalfOpenConnection]) -> int:
    return sum(len(c.open_streams()) for c in connections)


async def served(node: NodeProcess, token: str) -> tuple[int, bytes]:
    """Another caller, from 127.0.0.1: one Publish and the record read back by a Subscribe."""
    value = f"v-{time.monotonic_ns()}".encode()
    answer = await publish(node.grpc_address, pb.PublishRequest(topic=TOPIC, records=[pb.Record(value=value)]),
                           auth(token))
    offset = answer.positions[0].offset
    got = await subscribe(node.grpc_address, pb.SubscribeRequest(topic=TOPIC, partition=0, offset=offset),
                          auth(token), 1, timeout_s=10)
    assert got[0].value == value
    return offset, got[0].value


async def wait_until_open(connections: list[HalfOpenConnection], most: int, within_s: float) -> int:
    """The calls still open once at most ``most`` are, or ``within_s`` has passed."""
    deadline = time.monotonic() + within_s
    while still_open(connections) > most and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return still_open(connections)


def test_half_open_calls_without_a_token_are_refused_at_once_and_others_are_served(node, tokens):
    """As many half-open calls as the node has slots, with no token: each is refused as soon as its
    headers arrive, so none holds a slot and another caller is served."""
    async def scenario() -> tuple[int, float]:
        async with half_open(node, "127.0.0.2", CALLS_MAX, None) as connections:
            opened = time.monotonic()
            await served(node, tokens["admin"])
            open_after = await wait_until_open(connections, 0, AT_ONCE_S)
            last_end = max((t for c in connections for t in c.ended.values()), default=opened + 99)
            return open_after, last_end - opened

    open_after, ended_within_s = asyncio.run(scenario())
    assert open_after == 0
    assert ended_within_s < AT_ONCE_S  # refused at once, not at the request's deadline


def test_half_open_calls_with_a_token_hold_one_address_share_until_the_deadline(node, tokens):
    """A user's half-open calls from one address: past the address's share they are refused at once;
    the rest hold their slots only until the request deadline; meanwhile another caller is served."""
    async def scenario() -> tuple[int, int, list[float]]:
        async with half_open(node, "127.0.0.3", CALLS_MAX, f"Bearer {tokens['mallory']}") as connections:
            held = await wait_until_open(connections, PER_ADDRESS, AT_ONCE_S)
            await served(node, tokens["admin"])
            await wait_until_open(connections, 0, REQUEST_TIMEOUT_MS / 1000 + 5)
            lasted = sorted(c.ended[s] - c.opened[s] for c in connections for s in c.opened if s in c.ended)
            return held, still_open(connections), lasted

    held, open_after, lasted = asyncio.run(scenario())
    assert held == PER_ADDRESS
    assert open_after == 0
    deadline_s = REQUEST_TIMEOUT_MS / 1000
    assert all(t < AT_ONCE_S for t in lasted[:CALLS_MAX - PER_ADDRESS])  # refused at once
    assert all(deadline_s - 0.2 <= t < deadline_s + 3 for t in lasted[CALLS_MAX - PER_ADDRESS:])


def test_one_users_half_open_calls_from_many_addresses_hold_at_most_their_user_share(node, tokens):
    async def scenario() -> int:
        async with half_open(node, "127.0.0.4", PER_ADDRESS, f"Bearer {tokens['mallory']}") as first, \
                half_open(node, "127.0.0.5", PER_ADDRESS, f"Bearer {tokens['mallory']}") as second:
            held = await wait_until_open(first + second, PER_USER, AT_ONCE_S)
            await served(node, tokens["admin"])
            return held

    assert asyncio.run(scenario()) == PER_USER


async def never() -> AsyncIterator[Any]:
    await asyncio.Event().wait()
    yield pb.PublishRequest()


async def unsent_publish(node: NodeProcess, metadata: Any) -> tuple[grpc.StatusCode, float]:
    """A grpcio client's Publish whose request never comes (the wire of a unary call that stalls)."""
    async with grpc.aio.insecure_channel(node.grpc_address) as channel:
        call = channel.stream_unary(PUBLISH, request_serializer=pb.PublishRequest.SerializeToString,
                                    response_deserializer=pb.PublishResponse.FromString)
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await call(never(), metadata=metadata, timeout=10)
        return ended.value.code(), time.monotonic() - started


def test_a_call_whose_request_never_comes_ends_deadline_exceeded(node, tokens):
    code, lasted_s = asyncio.run(unsent_publish(node, auth(tokens["admin"])))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert REQUEST_TIMEOUT_MS / 1000 - 0.2 <= lasted_s < REQUEST_TIMEOUT_MS / 1000 + 3


def test_a_call_without_a_valid_token_is_refused_before_its_request(node, tokens):
    code, lasted_s = asyncio.run(unsent_publish(node, ()))
    assert code == grpc.StatusCode.UNAUTHENTICATED and lasted_s < AT_ONCE_S
    code, lasted_s = asyncio.run(unsent_publish(node, auth("not-a-token")))
    assert code == grpc.StatusCode.UNAUTHENTICATED and lasted_s < AT_ONCE_S


def test_a_request_that_is_not_the_methods_message_is_invalid_argument(node, tokens):
    async def scenario() -> list[grpc.StatusCode]:
        codes = []
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            for method in ("Publish", "Subscribe"):
                call = channel.stream_unary(f"/logbroker.v1.Broker/{method}", request_serializer=bytes,
                                            response_deserializer=bytes)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call(iter([b"\xff\xff\xff not protobuf"]), metadata=auth(tokens["admin"]), timeout=10)
                codes.append(refused.value.code())
        return codes

    assert asyncio.run(scenario()) == [grpc.StatusCode.INVALID_ARGUMENT] * 2


def test_with_auth_off_half_open_calls_hold_one_address_share_until_the_deadline(tmp_path):
    """No token can tell callers apart: the request's arrival proves a call. One address's half-open
    calls hold at most its share, until the deadline, and a call from elsewhere is served."""
    with NodeProcess(str(tmp_path), "--grpc-calls-max", str(CALLS_MAX), "--grpc-calls-reserved", str(RESERVED),
                     "--grpc-calls-per-connection-max", str(PER_CONNECTION),
                     "--grpc-calls-per-address-max", str(PER_ADDRESS),
                     "--grpc-request-timeout-ms", str(REQUEST_TIMEOUT_MS)) as open_node:
        Http(open_node.url).json("POST", "/v1/topics", 201, body={"name": TOPIC, "partitions": 1})

        async def scenario() -> tuple[int, int]:
            async with half_open(open_node, "127.0.0.2", CALLS_MAX, None) as connections:
                held = await wait_until_open(connections, PER_ADDRESS, AT_ONCE_S)
                await served(open_node, "")
                return held, await wait_until_open(connections, 0, REQUEST_TIMEOUT_MS / 1000 + 5)

        assert asyncio.run(scenario()) == (PER_ADDRESS, 0)


def test_one_connection_holds_at_most_its_share_and_the_rest_of_its_calls_are_refused_at_once(node, tokens):
    """Twice the per-connection bound of a user's half-open calls on one HTTP/2 connection: the
    bound's worth are held (until the deadline), the others refused at once; others are served."""
    async def scenario() -> tuple[int, list[float]]:
        host, port = node.grpc_address.rsplit(":", 1)
        async with HalfOpenConnection(host, int(port), "127.0.0.6") as connection:
            for _ in range(2 * PER_CONNECTION):
                await connection.open_call(PUBLISH, f"Bearer {tokens['mallory']}")
            held = await wait_until_open([connection], PER_CONNECTION, AT_ONCE_S)
            await served(node, tokens["admin"])
            refused = sorted(connection.ended[s] - connection.opened[s] for s in connection.ended)
            return held, refused

    held, refused = asyncio.run(scenario())
    assert held == PER_CONNECTION
    assert len(refused) >= PER_CONNECTION and all(t < AT_ONCE_S for t in refused[:PER_CONNECTION])


def test_with_auth_off_unproven_calls_from_many_addresses_never_take_the_reserved_slots(tmp_path):
    """Half-open calls from three addresses, each within its address share, together more than the
    node's unreserved slots: they hold exactly those, never the reserved ones (kept for calls that
    have proven themselves), the surplus is refused at once, and every slot is free again after the
    request deadline. (With auth off nothing proves a new call before its request, so a new caller
    waits out that deadline: with auth on, a token proves it at once, as the tests above show.)"""
    with NodeProcess(str(tmp_path), "--grpc-calls-max", str(CALLS_MAX), "--grpc-calls-reserved", str(RESERVED),
                     "--grpc-calls-per-connection-max", str(PER_CONNECTION),
                     "--grpc-calls-per-address-max", str(PER_ADDRESS),
                     "--grpc-request-timeout-ms", str(REQUEST_TIMEOUT_MS)) as open_node:
        Http(open_node.url).json("POST", "/v1/topics", 201, body={"name": TOPIC, "partitions": 1})
        assert 3 * PER_ADDRESS > CALLS_MAX - RESERVED

        async def scenario() -> tuple[int, int]:
            async with half_open(open_node, "127.0.0.7", PER_ADDRESS, None) as first, \
                    half_open(open_node, "127.0.0.8", PER_ADDRESS, None) as second, \
                    half_open(open_node, "127.0.0.9", PER_ADDRESS, None) as third:
                flood = first + second + third
                held = await wait_until_open(flood, CALLS_MAX - RESERVED, AT_ONCE_S)
                after_deadline = await wait_until_open(flood, 0, REQUEST_TIMEOUT_MS / 1000 + 5)
                await served(open_node, "")
                return held, after_deadline

        assert asyncio.run(scenario()) == (CALLS_MAX - RESERVED, 0)
