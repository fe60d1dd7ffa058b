"""Per-user limits through a real node with auth on and two users: each limit answers 429 with a
clear message and creates nothing while the other user keeps working; streams take a per-user
share of the node's slots and give it back as soon as their client goes; push streams and raw
fetches are charged to the fetch quota."""

from __future__ import annotations

import concurrent.futures
import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

PASSWORD = "password-of-a-user"
POLL_DEADLINE_S = 10.0
LIMITS = ("--quota-topics-max", "3", "--quota-partitions-max", "5", "--quota-streams-max", "2",
          "--quota-long-polls-max", "2", "--quota-groups-max", "2", "--quota-group-members-max", "3")


class As:
    def __init__(self, http: Http, name: str, token: str) -> None:
        self.http, self.name, self.token = http, name, token

    def call(self, method: str, path: str, **kwargs):
        return self.http.call(method, path, headers={**bearer(self.token), **kwargs.pop("headers", {})}, **kwargs)

    def json(self, method: str, path: str, expect: int = 200, **kwargs):
        return self.http.json(method, path, expect, headers={**bearer(self.token), **kwargs.pop("headers", {})},
                              **kwargs)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("limits")), *AUTH_ARGS, *LIMITS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, ADMIN, login(http, ADMIN, ADMIN_PASSWORD))


def make_user(http: Http, admin: As, name: str) -> As:
    admin.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD})
    return As(http, name, login(http, name, PASSWORD))


def assert_limit(reply, limit: str, value: int) -> None:
    assert reply.status == 429, (reply.status, reply.data[:300])
    problem = reply.json()
    assert problem["code"] == "too_many_requests" and problem["retriable"] is True
    assert limit in problem["detail"] and f"is {value}" in problem["detail"], problem["detail"]
    assert problem["limit"] == limit and problem["limit_value"] == value
    assert reply.headers["retry-after"]


def test_topics_and_partitions_owned_are_limited_per_user(http, admin):
    ann, bob = make_user(http, admin, "ann"), make_user(http, admin, "bob")
    ann.json("POST", "/v1/topics", 201, body={"name": "ann.1"})
    ann.json("POST", "/v1/topics", 201, body={"name": "ann.2"})
    queue = {"name": "ann.q", "kind": "queue", "config": {"dead_letter_topic": "ann.dead"}}
    assert_limit(ann.call("POST", "/v1/topics", body=queue), "topics_max", 3)  # a queue and its dead letters
    assert admin.call("GET", "/v1/topics/ann.q").status == 404, "nothing was created"
    assert admin.call("GET", "/v1/topics/ann.dead").status == 404
    ann.json("POST", "/v1/topics", 201, body={"name": "ann.3"})
    assert_limit(ann.call("POST", "/v1/topics", body={"name": "ann.4"}), "topics_max", 3)
    assert admin.call("GET", "/v1/topics/ann.4").status == 404
    bob.json("POST", "/v1/topics", 201, body={"name": "bob.1", "partitions": 4})
    assert_limit(bob.call("POST", "/v1/topics", body={"name": "bob.2", "partitions": 2}), "partitions_max", 5)
    assert admin.call("GET", "/v1/topics/bob.2").status == 404
    assert_limit(bob.call("POST", "/v1/topics/bob.1/partitions", body={"partitions": 6}), "partitions_max", 5)
    assert len(bob.json("GET", "/v1/topics/bob.1")["partitions"]) == 4
    bob.json("POST", "/v1/topics/bob.1/partitions", body={"partitions": 5})
    # a limit is per user: set one higher, the other is unchanged
    admin.json("PUT", "/v1/users/ann/quotas", body={"topics_max": 5})
    # a one-partition queue costs three partitions: its own, its state log's and its dead letters'
    assert_limit(ann.call("POST", "/v1/topics", body=queue), "partitions_max", 5)
    admin.json("PUT", "/v1/users/ann/quotas", body={"topics_max": 5, "partitions_max": 6})
    ann.json("POST", "/v1/topics", 201, body=queue)
    assert_limit(ann.call("POST", "/v1/topics", body={"name": "ann.4"}), "topics_max", 5)
    admin.json("POST", "/v1/topics", 201, body={"name": "admin.big", "partitions": 8})  # admins hold without limit


def test_groups_owned_are_limited_per_user(http, admin):
    dora, lou = make_user(http, admin, "dora"), make_user(http, admin, "lou")
    dora.json("POST", "/v1/topics", 201, body={"name": "dora.t"})
    join = {"topics": ["dora.t"], "session_timeout_ms": 10_000}
    for group in ("dora.g1", "dora.g2"):
        dora.json("POST", f"/v1/groups/{group}/members", body=join)
    assert_limit(dora.call("POST", "/v1/groups/dora.g3/members", body=join), "groups_max", 2)
    assert admin.call("GET", "/v1/groups/dora.g3").status == 404, "nothing was created"
    dora.json("POST", "/v1/groups/dora.g1/members", body=join)  # joining a group she owns is no new group
    lou.json("POST", "/v1/topics", 201, body={"name": "lou.t"})
    lou.json("POST", "/v1/groups/lou.g1/members", body={"topics": ["lou.t"], "session_timeout_ms": 10_000})


def test_group_members_held_are_limited_per_user_and_given_back_on_leave(http, admin):
    max_, nia = make_user(http, admin, "max"), make_user(http, admin, "nia")
    max_.json("POST", "/v1/topics", 201, body={"name": "max.t"})
    join = {"topics": ["max.t"], "session_timeout_ms": 30_000}
    members = [max_.json("POST", f"/v1/groups/max.g{i % 2}/members", body=join)["member_id"] for i in range(3)]
    assert_limit(max_.call("POST", "/v1/groups/max.g0/members", body=join), "group_members_max", 3)
    rejoined = max_.json("POST", "/v1/groups/max.g0/members", body={**join, "member_id": members[0]})
    assert rejoined["member_id"] == members[0], "a known member rejoins within the limit"
    max_.json("DELETE", f"/v1/groups/max.g0/members/{members[0]}", 204)
    max_.json("POST", "/v1/groups/max.g0/members", body=join)  # the slot it left is free again
    nia.json("POST", "/v1/topics", 201, body={"name": "nia.t"})
    nia.json("POST", "/v1/groups/nia.g/members", body={"topics": ["nia.t"], "session_timeout_ms": 30_000})


@pytest.mark.parametrize("quotas", [{"streams_max": -1}, {"long_polls_max": "2"}, {"topics_max": True},
                                    {"groups_max": 1 << 54}])
def test_bad_limits_are_refused(http, admin, quotas):
    if admin.call("GET", "/v1/users/carl").status == 404:
        make_user(http, admin, "carl")
    reply = admin.call("PUT", "/v1/users/carl/quotas", body=quotas)
    assert reply.status == 400 and reply.json()["code"] == "invalid_user"
    assert admin.json("GET", "/v1/users/carl")["quotas"] == {}


def _open_stream(node: NodeProcess, user: As, topic: str, query: str = "", *,
                 path: str | None = None) -> tuple[socket.socket, int]:
    """A raw SSE request (a partition's stream, or ``path``); the socket and the answer's status
    (its head is read)."""
    port = int(node.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    target = path or f"/v1/topics/{topic}/partitions/0/stream?keepalive_ms=60000{query}"
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {user.token}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "the node closed the connection before answering"
        head += chunk
    return sock, int(head.split(b" ", 2)[1])


def _read_for(sock: socket.socket, seconds: float) -> bytes:
    """What ``sock`` receives in ``seconds`` (then it is closed)."""
    received = b""
    try:
        sock.settimeout(0.2)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with contextlib.suppress(TimeoutError):
                received += sock.recv(65536)
    finally:
        sock.close()
    return received


def test_streams_are_limited_per_user_and_freed_when_the_client_goes(http, node, admin):
    dan, eve = make_user(http, admin, "dan"), make_user(http, admin, "eve")
    dan.json("POST", "/v1/topics", 201, body={"name": "dan.s"})
    dan.json("PUT", "/v1/topics/dan.s/acl", body={"user": "eve", "permissions": ["read"]})
    held = []
    try:
        for _ in range(2):
            sock, status = _open_stream(node, dan, "dan.s")
            held.append(sock)
            assert status == 200
        third, status = _open_stream(node, dan, "dan.s")
        third.close()
        assert status == 429
        reply = dan.call("GET", "/v1/topics/dan.s/partitions/0/stream")
        assert_limit(reply, "streams_max", 2)
        sock, status = _open_stream(node, eve, "dan.s")
        held.append(sock)
        assert status == 200, "another user's streams are their own"
        # a client that goes frees its slot although the stream would stay idle for 60 s
        held.pop(0).close()
        deadline = time.monotonic() + POLL_DEADLINE_S
        while True:
            sock, status = _open_stream(node, dan, "dan.s")
            if status == 200:
                held.append(sock)
                break
            sock.close()
            assert time.monotonic() < deadline, "the closed stream's slot was not freed"
            time.sleep(0.2)
    finally:
        for sock in held:
            sock.close()


def test_long_polls_are_limited_per_user(http, admin):
    fay, gus = make_user(http, admin, "fay"), make_user(http, admin, "gus")
    fay.json("POST", "/v1/topics", 201, body={"name": "fay.p"})
    fay.json("PUT", "/v1/topics/fay.p/acl", body={"user": "gus", "permissions": ["read"]})
    poll = "/v1/topics/fay.p/partitions/0/records?offset=0&wait_ms="
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        polls = [pool.submit(fay.call, "GET", poll + "8000") for _ in range(3)]
        refused = next(concurrent.futures.as_completed(polls, timeout=POLL_DEADLINE_S)).result()
        assert_limit(refused, "long_polls_max", 2)
        assert fay.call("GET", poll + "0").status == 200, "no wait: no limit"
        assert gus.call("GET", poll + "50").status == 200, "another user's long-polls are their own"
        assert sorted(f.result().status for f in polls) == [200, 200, 429]
    assert fay.call("GET", poll + "50").status == 200, "ended long-polls are given back"


def test_push_streams_and_raw_fetches_are_charged_to_the_fetch_quota(tmp_path):
    rate = 20_000
    with NodeProcess(str(tmp_path), *AUTH_ARGS, "--quota-fetch-bytes-per-s", str(rate)) as process:
        http = Http(process.url)
        admin = As(http, ADMIN, login(http, ADMIN, ADMIN_PASSWORD))
        hal = make_user(http, admin, "hal")
        hal.json("POST", "/v1/topics", 201, body={"name": "big"})
        for _ in range(6):
            hal.json("POST", "/v1/topics/big/records", body={"records": [{"value": "x" * 1000}] * 100})
        seconds = 3.0
        sock, status = _open_stream(process, hal, "big", "&offset=0")
        assert status == 200
        received = _read_for(sock, seconds)
        bound = rate * (1 + seconds) + rate  # the burst, the rate over the interval, one piece
        assert rate < len(received) <= bound, (len(received), bound)
        ids = [int(line[4:]) for line in received.split(b"\n") if line.startswith(b"id: ")]
        assert ids == list(range(len(ids))), "paced, not dropped: every record in order"
        # a group member's stream too (another user: quotas are per user)
        ivy = make_user(http, admin, "ivy")
        hal.json("PUT", "/v1/topics/big/acl", body={"user": "ivy", "permissions": ["read"]})
        member = ivy.json("POST", "/v1/groups/ivy.g/members", body={"topics": ["big"]})["member_id"]
        sock, status = _open_stream(process, ivy, "", path=f"/v1/groups/ivy.g/members/{member}/stream")
        assert status == 200
        received = _read_for(sock, seconds)
        assert rate < len(received) <= bound, (len(received), bound)
        ids = [int(line[4:]) for line in received.split(b"\n") if line.startswith(b"id: ")]
        assert ids == list(range(len(ids))) and len(ids) > 10
        # the stream's debt is the user's: a raw fetch waits for it to be repaid
        raw = {"Accept": "application/vnd.logbroker.batch"}
        time.sleep(1.5)
        deadline = time.monotonic() + POLL_DEADLINE_S
        while (first := hal.call("GET", "/v1/topics/big/partitions/0/records?offset=0&max_bytes=100000",
                                 headers=raw)).status == 429:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert first.status == 200 and len(first.data) > rate
        # charged once the answer is sent: a request racing that charge may still pass, no more
        after = [hal.call("GET", "/v1/topics/big/partitions/0/records?offset=0", headers=raw) for _ in range(3)]
        refused = [r for r in after if r.status == 429]
        assert refused and "fetch quota" in refused[0].json()["detail"], "raw fetches are charged"


def test_a_gone_member_stream_frees_its_slot(http, node, admin):
    kim = make_user(http, admin, "kim")
    kim.json("POST", "/v1/topics", 201, body={"name": "kim.t"})
    members = [kim.json("POST", "/v1/groups/kim.g/members", body={"topics": ["kim.t"], "session_timeout_ms": 60000})
               ["member_id"] for _ in range(2)]
    paths = [f"/v1/groups/kim.g/members/{m}/stream" for m in members]
    held = []
    try:
        for path in paths:
            sock, status = _open_stream(node, kim, "", path=path)
            held.append(sock)
            assert status == 200
        assert_limit(kim.call("GET", paths[0]), "streams_max", 2)
        held.pop(0).close()  # its stream would write nothing for 20 s (the heartbeat interval)
        deadline = time.monotonic() + 5.0
        while True:
            sock, status = _open_stream(node, kim, "", path=paths[0])
            if status == 200:
                held.append(sock)
                break
            sock.close()
            assert time.monotonic() < deadline, "the closed member stream's slot was not freed"
            time.sleep(0.2)
    finally:
        for sock in held:
            sock.close()


def test_subscribe_streams_take_the_same_slots_as_push_streams(http, node, admin):
    """A user cannot open more streams by mixing kinds: subscribe streams (WebSockets) count
    against ``streams_max`` with push streams, and a slot comes back when the subscriber goes."""
    import asyncio

    import aiohttp

    from tests.support.websockets import upgrade_status

    ivan = make_user(http, admin, "ivan")
    ivan.json("POST", "/v1/topics", 201, body={"name": "ivan.s"})
    push, status = _open_stream(node, ivan, "ivan.s")
    assert status == 200
    try:
        async def hold_one_and_try_another() -> tuple[int, int]:
            async with aiohttp.ClientSession() as session, \
                    session.ws_connect(f"{node.url}/v1/topics/ivan.s/partitions/0/subscribe",
                                       headers=bearer(ivan.token)):
                third = await asyncio.to_thread(upgrade_status, node.url, "/v1/topics/ivan.s/partitions/0/subscribe",
                                                ivan.token)
                sse, sse_status = await asyncio.to_thread(_open_stream, node, ivan, "ivan.s")
                sse.close()
                return third, sse_status

        assert asyncio.run(hold_one_and_try_another()) == (429, 429)
        deadline = time.monotonic() + POLL_DEADLINE_S
        while upgrade_status(node.url, "/v1/topics/ivan.s/partitions/0/subscribe", ivan.token) != 101:
            assert time.monotonic() < deadline, "the gone subscriber's slot was not freed"
            time.sleep(0.2)
    finally:
        push.close()
