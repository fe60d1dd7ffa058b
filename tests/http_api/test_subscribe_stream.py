"""Subscribe streams (decision 0379): a partition's stored batches pushed over a WebSocket as they
are appended, with the push stream's rules (access, slots, the fetch quota); through a real node
with auth on, and with the client's ``Client.subscribe``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest

from logbroker.client import Client, LogBrokerError
from segments.batch import encode_values
from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess
from tests.support.websockets import upgrade_status

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("subscribe-stream")), *AUTH_ARGS) as process:
        yield process


@pytest.fixture(scope="module")
def users(http: Http) -> tuple[As, As, As]:
    admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
    return admin, make_user(http, admin, "sub-owner"), make_user(http, admin, "sub-guest")


def _topic(owner: As, name: str) -> None:
    owner.json("POST", "/v1/topics", 201, body={"name": name, "partitions": 1})


def _produce(user: As, topic: str, values: list[bytes]) -> None:
    user.json("POST", f"/v1/topics/{topic}/records?partition=0", raw=encode_values(values),
              content_type="application/vnd.logbroker.batch")


def test_stored_batches_from_an_offset_then_new_ones_arrive(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "sub-tail")
    _produce(owner, "sub-tail", [b"a", b"b", b"c"])  # one batch: offsets 0-2, the stream starts inside it

    async def run() -> tuple[list[tuple[int, bytes | None]], int]:
        got: list[tuple[int, bytes | None]] = []
        async with Client(node.url, token=owner.token) as client:
            subscription = await client.subscribe("sub-tail", 0, offset=1)
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    batches = aiter(subscription)
                    first = await anext(batches)
                    got += list(zip(first.offsets, first.values, strict=True))
                    await asyncio.to_thread(_produce, owner, "sub-tail", [b"d"])
                    await asyncio.to_thread(_produce, owner, "sub-tail", [b"e", b"f"])
                    while len(got) < 5:
                        batch = await anext(batches)
                        got += list(zip(batch.offsets, batch.values, strict=True))
            finally:
                await subscription.close()
            return got, subscription.position

    got, position = asyncio.run(run())
    assert got == [(1, b"b"), (2, b"c"), (3, b"d"), (4, b"e"), (5, b"f")]
    assert position == 6


def test_without_an_offset_the_stream_starts_at_the_end(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "sub-end")
    _produce(owner, "sub-end", [b"old"])

    async def run() -> list[bytes | None]:
        async with Client(node.url, token=owner.token) as client:
            subscription = await client.subscribe("sub-end", 0)
            try:
                await asyncio.to_thread(_produce, owner, "sub-end", [b"new"])
                async with asyncio.timeout(TIMEOUT_S):
                    async for batch in subscription:
                        return list(batch.values)
            finally:
                await subscription.close()
        return []

    assert asyncio.run(run()) == [b"new"]


def test_the_upgrade_is_authenticated_authorized_and_checked(node: NodeProcess, users: tuple[As, As, As]):
    admin, owner, guest = users
    _topic(owner, "sub-door")
    _produce(owner, "sub-door", [b"x"])
    path = "/v1/topics/sub-door/partitions/0/subscribe"
    assert upgrade_status(node.url, path, None) == 401
    assert upgrade_status(node.url, path, guest.token) == 403
    assert upgrade_status(node.url, "/v1/topics/sub-none/partitions/0/subscribe", admin.token) == 404
    assert upgrade_status(node.url, "/v1/topics/sub-door/partitions/3/subscribe", owner.token) == 404
    assert upgrade_status(node.url, path + "?offset=5", owner.token) == 416
    assert upgrade_status(node.url, path + "?offset=-1", owner.token) == 400
    assert upgrade_status(node.url, path + "?offset=1", owner.token) == 101
    plain = owner.call("GET", path)  # not an upgrade: a problem, not a half-open socket
    assert plain.status == 400 and plain.headers["content-type"] == "application/problem+json"


def test_losing_read_ends_the_stream_with_the_problem(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, guest = users
    _topic(owner, "sub-revoke")
    owner.json("PUT", "/v1/topics/sub-revoke/acl", body={"user": "sub-guest", "permissions": ["read"]})

    async def run() -> tuple[list[bytes | None], LogBrokerError]:
        seen: list[bytes | None] = []
        async with Client(node.url, token=guest.token) as client:
            subscription = await client.subscribe("sub-revoke", 0, offset=0)
            try:
                await asyncio.to_thread(_produce, owner, "sub-revoke", [b"allowed"])
                with pytest.raises(LogBrokerError) as ended:
                    async with asyncio.timeout(TIMEOUT_S):
                        async for batch in subscription:
                            seen += batch.values
                            await asyncio.to_thread(owner.json, "PUT", "/v1/topics/sub-revoke/acl",
                                                    body={"user": "sub-guest", "permissions": []})
                            await asyncio.to_thread(_produce, owner, "sub-revoke", [b"after"])
            finally:
                await subscription.close()
            return seen, ended.value

    seen, ended = asyncio.run(run())
    assert seen == [b"allowed"]
    assert ended.status == 403


def test_a_message_from_the_client_closes_the_stream(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "sub-talk")

    async def run() -> int | None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session, \
                session.ws_connect(f"{node.url}/v1/topics/sub-talk/partitions/0/subscribe",
                                   headers=bearer(owner.token)) as socket:
            await socket.send_str("hello")
            closing = await socket.receive()
            assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            return socket.close_code

    assert asyncio.run(run()) == aiohttp.WSCloseCode.UNSUPPORTED_DATA


def test_a_subscription_is_paced_by_the_fetch_quota_and_loses_nothing(tmp_path):
    """More stored than the quota lets out in the test's time: what arrives is within the quota's
    bound, in order, and whole (pieces cut inside a batch are joined by the client)."""
    rate, seconds = 20_000, 3.0
    with NodeProcess(str(tmp_path), *AUTH_ARGS, "--quota-fetch-bytes-per-s", str(rate)) as process:
        http = Http(process.url)
        admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
        hal = make_user(http, admin, "sub-hal")
        _topic(hal, "sub-big")
        for _ in range(6):
            _produce(hal, "sub-big", [b"x" * 1000] * 30)

        async def run() -> list[int]:
            offsets: list[int] = []
            async with Client(process.url, token=hal.token) as client:
                subscription = await client.subscribe("sub-big", 0, offset=0)
                try:
                    async with asyncio.timeout(seconds):
                        async for batch in subscription:
                            offsets += batch.offsets
                except TimeoutError:
                    pass
                finally:
                    await subscription.close()
            return offsets

        offsets = asyncio.run(run())
        bound = (rate * (1 + seconds) + rate) // 1000  # the burst, the rate over the interval, one piece
        assert 0 < len(offsets) <= bound, (len(offsets), bound)
        assert offsets == list(range(len(offsets)))
