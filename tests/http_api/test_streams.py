"""Push streams (SSE) against a real node: records produced after the client connected arrive in
offset order; the group variant follows the member's assignment; a slow reader does not make the
node buffer; bad input is refused before the stream starts."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time

import pytest

from logbroker.client import Client
from logbroker.client.sse import SseParser
from tests.support.metrics import requests_total


@pytest.fixture(scope="module")
def topics(http):
    http.json("POST", "/v1/topics", expect=201, body={"name": "live", "partitions": 2})
    http.json("POST", "/v1/topics", expect=201, body={"name": "bulk"})
    return "live"


async def collect(events, count: int, kinds=("record",)) -> list:
    out = []
    async with asyncio.timeout(30):
        async for event in events:
            if event.kind in kinds:
                out.append(event)
                if len(out) == count:
                    return out
    return out


def test_stream_receives_records_produced_after_connecting(http, node, topics):
    http.json("POST", "/v1/topics/live/records", body={"records": [{"value": "before", "partition": 0}]})

    async def main() -> list:
        async with Client(node.url) as client, client.stream("live", 0, keepalive_ms=50) as events:
            for batch in range(5):
                await client.produce("live", [{"value": f"v{batch}-{i}", "partition": 0} for i in range(20)])
            return await collect(events, 100)

    events = asyncio.run(main())
    records = [json.loads(e.data) for e in events]
    assert [r["value"] for r in records] == [f"v{b}-{i}" for b in range(5) for i in range(20)]
    offsets = [r["offset"] for r in records]
    assert offsets == list(range(1, 101)) and [e.id for e in events] == [str(o) for o in offsets]


def test_a_stream_with_encoding_base64_sends_every_byte_field_as_base64(http, node, topics):
    http.json("POST", "/v1/topics", expect=201, body={"name": "encoded"})
    http.json("POST", "/v1/topics/encoded/records", body={"records": [
        {"key": "k", "value": "text", "headers": [["h", "v"]]}, {"value_b64": base64.b64encode(b"\x00\xff").decode()}]})

    async def main() -> list:
        async with Client(node.url) as client:
            session = client._http()
            async with session.get(f"{node.url}/v1/topics/encoded/partitions/0/stream",
                                   params={"offset": 0, "encoding": "base64"}) as response:
                parser, got = SseParser(), []
                async for raw in response.content:
                    event = parser.feed(raw.decode().rstrip("\r\n"))
                    if event is not None and event.kind == "record":
                        got.append(json.loads(event.data))
                        if len(got) == 2:
                            return got
        return []

    first, second = asyncio.run(main())
    assert (first["key_b64"], first["value_b64"], first["headers"]) == ("aw==", "dGV4dA==", [{"name": "h",
                                                                                             "value_b64": "dg=="}])
    assert "value" not in first and base64.b64decode(second["value_b64"]) == b"\x00\xff"


def test_stream_from_an_offset_and_resume_with_last_event_id(http, node, topics):
    http.json("POST", "/v1/topics/live/records", body={"records": [{"value": str(i), "partition": 1}
                                                                   for i in range(10)]})

    async def main() -> tuple[list, list]:
        async with Client(node.url) as client:
            async with client.stream("live", 1, offset=3) as events:
                first = await collect(events, 7)
            session = client._http()
            async with session.get(f"{node.url}/v1/topics/live/partitions/1/stream",
                                   headers={"Last-Event-ID": "7"}) as response:
                parser, resumed = SseParser(), []
                async for raw in response.content:
                    event = parser.feed(raw.decode().rstrip("\r\n"))
                    if event is not None and event.kind == "record":
                        resumed.append(event)
                        if len(resumed) == 2:
                            break
            return first, resumed

    first, resumed = asyncio.run(main())
    assert [json.loads(e.data)["value"] for e in first] == [str(i) for i in range(3, 10)]
    assert [json.loads(e.data)["offset"] for e in resumed] == [8, 9]


def test_member_stream_follows_the_assignment(http, node, topics):
    member = http.json("POST", "/v1/groups/sg/members", body={"topics": ["live"], "session_timeout_ms": 3000})

    async def main() -> tuple[list, list]:
        async with Client(node.url) as client, client.stream_member("sg", member["member_id"]) as events:
            first = await collect(events, 1, kinds=("assignment",))
            await client.produce("live", [{"value": "late", "partition": 0}])
            records = []
            async with asyncio.timeout(30):
                async for event in events:
                    if event.kind == "record":
                        records.append(json.loads(event.data))
                        if records[-1]["value"] == "late":
                            break
            other = await client.join_group("sg", ["live"], session_timeout_ms=3000)
            second = await collect(events, 1, kinds=("assignment",))
            await client.leave_group("sg", other["member_id"])
            return [json.loads(e.data) for e in first + second], records

    assignments, records = asyncio.run(main())
    assert assignments[0]["assignment"] == {"live": [0, 1]} and assignments[0]["generation"] == 1
    assert assignments[1]["generation"] == 2 and len(assignments[1]["assignment"]["live"]) == 1
    assert {(r["topic"], r["partition"]) for r in records} <= {("live", 0), ("live", 1)}
    per_partition = {}
    for r in records:
        assert r["offset"] > per_partition.get(r["partition"], -1)
        per_partition[r["partition"]] = r["offset"]
    http.json("DELETE", f"/v1/groups/sg/members/{member['member_id']}", expect=204)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_slow_reader_does_not_make_the_node_buffer(http, node, topics):
    value = "x" * 10_000
    for _ in range(40):  # 40 MB of records
        http.json("POST", "/v1/topics/bulk/records", body={"records": [{"value": value}] * 100})
    before = rss_kib(node.pid)
    sock = socket.create_connection(("127.0.0.1", int(node.url.rsplit(":", 1)[1])))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /v1/topics/bulk/partitions/0/stream?offset=0 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        deadline = time.monotonic() + 2
        samples = []
        while time.monotonic() < deadline:
            samples.append(rss_kib(node.pid))
            time.sleep(0.1)
        assert max(samples) - before < 16 * 1024, "the node buffered the stream for a reader that reads nothing"
        assert http.json("GET", "/healthz") == {"status": "ok"}
    finally:
        sock.close()


@pytest.mark.parametrize(("path", "headers", "status"), [
    ("/v1/topics/nope/partitions/0/stream", {}, 404),
    ("/v1/topics/live/partitions/9/stream", {}, 404),
    ("/v1/topics/live/partitions/0/stream?offset=999999", {}, 416),
    ("/v1/topics/live/partitions/0/stream?offset=-1", {}, 400),
    ("/v1/topics/live/partitions/0/stream?keepalive_ms=0", {}, 400),
    ("/v1/topics/live/partitions/0/stream", {"Last-Event-ID": "x"}, 400),
    ("/v1/groups/sg/members/nobody/stream", {}, 404),
    ("/v1/groups/sg/members/a%20b/stream", {}, 400),
    ("/v1/groups/sg/members/abc/stream?auto_offset_reset=middle", {}, 400),
    ("/v1/topics/live/partitions/0/stream?encoding=hex", {}, 400),
    ("/v1/groups/sg/members/abc/stream?encoding=utf-16", {}, 400),
])
def test_bad_stream_requests_are_refused_before_streaming(http, topics, path, headers, status):
    reply = http.call("GET", path, headers=headers)
    assert reply.status == status, reply.data
    assert reply.headers["content-type"].startswith("application/problem+json")



def test_streams_end_with_an_end_event_when_their_source_goes(http, node, topics):
    http.json("POST", "/v1/topics", expect=201, body={"name": "doomed"})
    member = http.json("POST", "/v1/groups/sg-end/members", body={"topics": ["live"], "session_timeout_ms": 5000})

    async def main() -> tuple[list, list]:
        async with Client(node.url) as client:
            async with client.stream("doomed", 0, keepalive_ms=50) as events:
                await client.delete_topic("doomed")
                ended = await collect(events, 1, kinds=("end",))
            async with client.stream_member("sg-end", member["member_id"]) as events:
                await collect(events, 1, kinds=("assignment",))
                await client.leave_group("sg-end", member["member_id"])
                left = await collect(events, 1, kinds=("end",))
            return ended, left

    ended, left = asyncio.run(main())
    assert "doomed" in json.loads(ended[0].data)["reason"]
    assert "join again" in json.loads(left[0].data)["reason"]


def request_count(http, route: str, status: int) -> float:
    return requests_total(http, "GET", route, status)


@pytest.mark.parametrize("kind", ["partition", "member"])
def test_a_stream_its_client_closes_is_counted_a_200_not_a_500(http, node, topics, kind):
    """A client that goes away ends its stream quietly: the handler still answers with the response
    it started, so the node neither logs nor counts a server error for it."""
    if kind == "partition":
        route, path = "/v1/topics/{name}/partitions/{partition}/stream", "/v1/topics/live/partitions/1/stream"
    else:
        member = http.json("POST", "/v1/groups/sg-gone/members", body={"topics": ["live"], "session_timeout_ms": 5000})
        route = "/v1/groups/{group}/members/{member}/stream"
        path = f"/v1/groups/sg-gone/members/{member['member_id']}/stream"
    served, failed = request_count(http, route, 200), request_count(http, route, 500)
    sock = socket.create_connection(("127.0.0.1", int(node.url.rsplit(":", 1)[1])))
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        sock.close()
    deadline = time.monotonic() + 10
    while request_count(http, route, 200) == served and request_count(http, route, 500) == failed:
        assert time.monotonic() < deadline, "the closed stream never ended"
        time.sleep(0.05)
    assert request_count(http, route, 500) == failed, "a client going away was counted a server error"
    assert request_count(http, route, 200) == served + 1
