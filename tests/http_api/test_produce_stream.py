"""Produce streams (decision 0254): prebuilt batches over one WebSocket, each answered in order,
checked and charged as an HTTP produce is; through a real node with auth on."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from logbroker.client import Client, LogBrokerError
from logbroker.client.produce_stream import ProduceStream
from segments.batch import ProducerRecord, encode_batch, encode_values
from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess
from tests.support.websockets import upgrade_status

BODY_MAX = 64 * 1024
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("produce-stream")), *AUTH_ARGS,
                     "--request-body-bytes-max", str(BODY_MAX)) as process:
        yield process


@pytest.fixture(scope="module")
def users(http: Http) -> tuple[As, As, As]:
    admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
    return admin, make_user(http, admin, "stream-owner"), make_user(http, admin, "stream-guest")


def _topic(owner: As, name: str) -> None:
    owner.json("POST", "/v1/topics", 201, body={"name": name, "partitions": 1})


def _values(user: As, topic: str) -> list[str]:
    answer = user.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0")
    return [r["value"] for r in answer["records"]]


def _exchange(node: NodeProcess, token: str, topic: str, messages: list[bytes | str], *,
              query: str = "") -> tuple[list[dict[str, Any]], int | None]:
    """Send ``messages`` on a produce stream (bytes binary, str text), one at a time, reading the
    answer to each until the node closes; the answers and the close code."""
    async def run() -> tuple[list[dict[str, Any]], int | None]:
        answers: list[dict[str, Any]] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session, \
                session.ws_connect(f"{node.url}/v1/topics/{topic}/partitions/0/produce{query}",
                                   headers=bearer(token)) as socket:
            for message in messages:
                if isinstance(message, bytes):
                    await socket.send_bytes(message)
                else:
                    await socket.send_str(message)
                reply = await socket.receive()
                if reply.type != aiohttp.WSMsgType.TEXT:
                    break
                answers.append(json.loads(reply.data))
            await socket.close()
            return answers, socket.close_code
    return asyncio.run(run())


def test_batches_are_appended_and_answered_in_order(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "ws-order")
    batches = [encode_values([f"m{i}-{j}".encode() for j in range(i + 1)]) for i in range(4)]
    answers, code = _exchange(node, owner.token, "ws-order", [*batches], query="?acks=all")
    assert [a["seq"] for a in answers] == [1, 2, 3, 4]
    assert [a["offset"] for a in answers] == [0, 1, 3, 6]
    assert [a["count"] for a in answers] == [1, 2, 3, 4]
    assert code == aiohttp.WSCloseCode.OK
    assert _values(owner, "ws-order") == [f"m{i}-{j}" for i in range(4) for j in range(i + 1)]


def test_a_bad_batch_is_answered_with_its_problem_stores_nothing_and_the_stream_goes_on(
        node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "ws-bad")
    good = encode_values([b"good"])
    corrupt = bytearray(encode_values([b"bad"]))
    corrupt[-1] ^= 0xFF
    answers, _ = _exchange(node, owner.token, "ws-bad", [good, bytes(corrupt), b"\x00" * 10, good])
    assert [("error" in a, a["seq"]) for a in answers] == [(False, 1), (True, 2), (True, 3), (False, 4)]
    assert answers[1]["error"]["status"] == 400 and answers[2]["error"]["status"] == 400
    assert answers[3]["offset"] == 1
    assert _values(owner, "ws-bad") == ["good", "good"]


def test_a_batch_under_another_writers_producer_id_is_refused(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "ws-writer")
    foreign = encode_batch([ProducerRecord(None, b"spoofed")], producer_id=12345, producer_epoch=0, base_sequence=0)
    answers, _ = _exchange(node, owner.token, "ws-writer", [foreign])
    assert answers[0]["error"]["status"] == 403
    assert _values(owner, "ws-writer") == []


def test_a_text_message_or_one_past_the_body_bound_closes_the_stream(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "ws-close")
    answers, code = _exchange(node, owner.token, "ws-close", ['{"records": []}'])
    assert answers == [] and code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
    answers, code = _exchange(node, owner.token, "ws-close", [encode_values([b"x" * (BODY_MAX + 1)])])
    assert answers == [] and code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG
    assert _values(owner, "ws-close") == []


def test_the_upgrade_is_authenticated_authorized_and_checked(node: NodeProcess, http: Http,
                                                              users: tuple[As, As, As]):
    admin, owner, guest = users
    _topic(owner, "ws-door")
    path = "/v1/topics/ws-door/partitions/0/produce"
    assert upgrade_status(node.url, path, None) == 401
    assert upgrade_status(node.url, path, guest.token) == 403
    assert upgrade_status(node.url, "/v1/topics/ws-none/partitions/0/produce", owner.token) == 403  # unknown: as ever
    assert upgrade_status(node.url, "/v1/topics/ws-none/partitions/0/produce", admin.token) == 404
    assert upgrade_status(node.url, "/v1/topics/ws-door/partitions/7/produce", owner.token) == 404
    assert upgrade_status(node.url, path + "?acks=2", owner.token) == 400
    plain = owner.call("GET", path)  # not an upgrade: a problem, not a half-open socket
    assert plain.status == 400 and plain.headers["content-type"] == "application/problem+json"


def test_losing_write_ends_the_stream_before_the_next_batch(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, guest = users
    _topic(owner, "ws-revoke")
    owner.json("PUT", "/v1/topics/ws-revoke/acl", body={"user": "stream-guest", "permissions": ["read", "write"]})

    async def run() -> tuple[list[dict[str, Any]], int | None]:
        answers = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session, \
                session.ws_connect(f"{node.url}/v1/topics/ws-revoke/partitions/0/produce",
                                   headers=bearer(guest.token)) as socket:
            await socket.send_bytes(encode_values([b"allowed"]))
            answers.append(json.loads((await socket.receive()).data))
            await asyncio.to_thread(owner.json, "PUT", "/v1/topics/ws-revoke/acl",
                                    body={"user": "stream-guest", "permissions": ["read"]})
            await socket.send_bytes(encode_values([b"after-revoke"]))
            answers.append(json.loads((await socket.receive()).data))
            closing = await socket.receive()
            assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            return answers, socket.close_code

    answers, code = asyncio.run(run())
    assert "offset" in answers[0] and answers[1]["error"]["status"] == 403
    assert code == aiohttp.WSCloseCode.POLICY_VIOLATION
    assert _values(owner, "ws-revoke") == ["allowed"]


def test_the_client_sends_batches_and_gets_offsets_and_errors(node: NodeProcess, users: tuple[As, As, As]):
    _, owner, _ = users
    _topic(owner, "ws-client")

    async def run() -> tuple[list[int], LogBrokerError]:
        async with Client(node.url, token=owner.token) as client, \
                await client.produce_stream("ws-client", 0, in_flight_max=2) as stream:
            sent = [await stream.send(encode_values([f"c{i}".encode()])) for i in range(5)]
            bad = await stream.send(b"\x01" * 70)
            offsets = [await answer for answer in sent]
            with pytest.raises(LogBrokerError) as refused:
                await bad
            return offsets, refused.value

    offsets, refused = asyncio.run(run())
    assert offsets == [0, 1, 2, 3, 4]
    assert refused.status == 400
    assert _values(owner, "ws-client") == [f"c{i}" for i in range(5)]


def test_the_client_is_told_when_the_node_refuses_the_stream(node: NodeProcess, users: tuple[As, As, As]):
    _, _, guest = users

    async def run() -> LogBrokerError:
        async with Client(node.url, token=guest.token) as client:
            with pytest.raises(LogBrokerError) as refused:
                await client.produce_stream("ws-client", 0)
            return refused.value

    assert asyncio.run(run()).status == 403


def test_pipelined_batches_keep_their_order_and_every_one_is_answered(node: NodeProcess, users: tuple[As, As, As]):
    """Hundreds of batches sent without waiting (a bad one among them), ``acks=all``: each is
    answered once, in the order sent (answers ready together may share a message), and the
    partition holds the good ones in that order."""
    _, owner, _ = users
    _topic(owner, "ws-pipelined")
    count, bad_at = 300, 150
    messages = [b"\x00" * 10 if i == bad_at else encode_values([f"p{i}".encode()]) for i in range(count)]

    async def run() -> tuple[list[dict[str, Any]], int]:
        answers: list[dict[str, Any]] = []
        frames = 0
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session, \
                session.ws_connect(f"{node.url}/v1/topics/ws-pipelined/partitions/0/produce?acks=all",
                                   headers=bearer(owner.token)) as socket:
            for message in messages:
                await socket.send_bytes(message)
            while len(answers) < count:
                reply = await socket.receive()
                assert reply.type == aiohttp.WSMsgType.TEXT, reply
                frames += 1
                decoded = json.loads(reply.data)
                answers.extend(decoded if isinstance(decoded, list) else [decoded])
        return answers, frames

    answers, frames = asyncio.run(run())
    assert [a["seq"] for a in answers] == list(range(1, count + 1))
    assert answers[bad_at]["error"]["status"] == 400
    good = [a for i, a in enumerate(answers) if i != bad_at]
    assert [a["offset"] for a in good] == list(range(count - 1))
    assert 1 <= frames <= count
    assert _values(owner, "ws-pipelined") == [f"p{i}" for i in range(count) if i != bad_at]


def test_answers_keep_their_order_when_the_flush_policy_changes_mid_stream(node: NodeProcess,
                                                                           users: tuple[As, As, As]):
    """Under ``flush=always`` a message's answer waits for its fsync (a task of its own, the next
    messages appended meanwhile); otherwise it is answered where it is read. Switching the topic's
    policy while messages are in flight mixes the two: every answer still comes once, in order."""
    _, owner, _ = users
    owner.json("POST", "/v1/topics", 201, body={"name": "ws-mixed", "partitions": 1, "config": {"flush": "always"}})
    rounds, per_round = ("always", "interval", "always", "interval"), 60

    async def run() -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session, \
                session.ws_connect(f"{node.url}/v1/topics/ws-mixed/partitions/0/produce",
                                   headers=bearer(owner.token)) as socket:
            for number, flush in enumerate(rounds):
                await asyncio.to_thread(owner.json, "PATCH", "/v1/topics/ws-mixed/config", body={"flush": flush})
                for i in range(per_round):
                    await socket.send_bytes(encode_values([f"{number}-{i}".encode()]))
            while len(answers) < len(rounds) * per_round:
                reply = await socket.receive()
                assert reply.type == aiohttp.WSMsgType.TEXT, reply
                decoded = json.loads(reply.data)
                answers.extend(decoded if isinstance(decoded, list) else [decoded])
        return answers

    answers = asyncio.run(run())
    total = len(rounds) * per_round
    assert [a["seq"] for a in answers] == list(range(1, total + 1))
    assert [a["offset"] for a in answers] == list(range(total))
    assert _values(owner, "ws-mixed") == [f"{n}-{i}" for n in range(len(rounds)) for i in range(per_round)]


def test_the_client_takes_answers_that_share_a_message():
    """A node that answers several batches in one message (a JSON array): each send's future gets
    its own answer, an error included."""
    async def produce_stream_answering_in_pairs(request: web.Request) -> web.WebSocketResponse:
        answering = web.WebSocketResponse()
        await answering.prepare(request)
        pending: list[int] = []
        async for _batch in answering:
            pending.append(len(pending) + 1)
            if len(pending) % 2 == 0:
                first, second = pending[-2:]
                await answering.send_str(json.dumps([
                    {"seq": first, "offset": 10 * first, "count": 1},
                    {"seq": second, "error": {"status": 400, "code": "invalid_batch", "detail": "no"}}]))
        return answering

    async def run() -> tuple[list[int], list[int]]:
        app = web.Application()
        app.router.add_get("/v1/topics/t/partitions/0/produce", produce_stream_answering_in_pairs)
        runner = web.AppRunner(app)
        await runner.setup()
        listener = socket.create_server(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        await web.SockSite(runner, listener).start()
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session:
                connection = await session.ws_connect(url + "/v1/topics/t/partitions/0/produce")
                stream = ProduceStream(connection, url)
                sent = [await stream.send(b"batch") for _ in range(4)]
                results = await asyncio.gather(*sent, return_exceptions=True)
                await stream.close()
        finally:
            await runner.cleanup()
        return ([r for r in results if isinstance(r, int)],
                [r.status for r in results if isinstance(r, LogBrokerError)])

    offsets, errors = asyncio.run(run())
    assert offsets == [10, 30] and errors == [400, 400]


def test_a_pipelined_stream_is_paced_by_the_produce_quota(tmp_path):
    """Messages sent far faster than the caller's produce quota: they are appended at its pace (the
    quota's burst, then its rate), none refused or lost, in order."""
    rate, size, seconds = 20_000, 1_000, 3.0
    with NodeProcess(str(tmp_path), *AUTH_ARGS, "--quota-produce-bytes-per-s", str(rate)) as process:
        http = Http(process.url)
        admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
        kim = make_user(http, admin, "paced-kim")
        _topic(kim, "ws-paced")
        batch = encode_values([b"x" * (size - 80)])

        async def run() -> list[dict[str, Any]]:
            answers: list[dict[str, Any]] = []
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session, \
                    session.ws_connect(f"{process.url}/v1/topics/ws-paced/partitions/0/produce",
                                       headers=bearer(kim.token)) as socket:
                for _ in range(200):
                    await socket.send_bytes(batch)
                deadline = asyncio.get_running_loop().time() + seconds
                while (left := deadline - asyncio.get_running_loop().time()) > 0:
                    try:
                        reply = await socket.receive(timeout=left)
                    except TimeoutError:
                        break
                    decoded = json.loads(reply.data)
                    answers.extend(decoded if isinstance(decoded, list) else [decoded])
            return answers

        answers = asyncio.run(run())
        bound = (rate * (1 + seconds) + rate) // len(batch)  # the burst, the rate over the interval, one more
        assert rate // len(batch) < len(answers) <= bound, (len(answers), bound)
        assert [a["offset"] for a in answers] == list(range(len(answers)))
