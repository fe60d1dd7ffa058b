"""Revocation that bites (decisions 0174, 0175), on a real node with two real users: tokens die with
a password change, a delete-and-recreate and an admin's revocation; open streams and long-polls
end when their caller loses read."""

from __future__ import annotations

import asyncio
import http.client as httpclient
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from logbroker.client import Client, LogBrokerError
from tests.http_api.conftest import Http
from tests.http_api.test_auth import PASSWORD, As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

RECHECK_MS = 300
# How long a test waits for what must happen within RECHECK_MS: generous, so a loaded machine
# does not fail it, and still far below the stream's idle keep-alive (60 s) that would end it too.
STREAM_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("revocation")), *AUTH_ARGS,
                     "--access-recheck-ms", str(RECHECK_MS)) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


class Sse:
    """An open Server-Sent Events stream read event by event (blocking, with a socket timeout)."""

    def __init__(self, http: Http, path: str, token: str) -> None:
        self.connection = httpclient.HTTPConnection(http.host, http.port, timeout=STREAM_TIMEOUT_S)
        self.connection.request("GET", path, headers=bearer(token))
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()[:300]

    def next_event(self) -> tuple[str, Any] | None:
        """The next event's kind and data (comments skipped), or None when the stream ended."""
        kind, data = "message", None
        while True:
            line = self.response.readline()
            if not line:
                return None
            text = line.decode().rstrip("\n")
            if text.startswith("event: "):
                kind = text[len("event: "):]
            elif text.startswith("data: "):
                data = json.loads(text[len("data: "):])
            elif text == "" and data is not None:
                return kind, data

    def close(self) -> None:
        self.connection.close()


def _token_detail(user: As) -> tuple[int, str]:
    reply = user.call("GET", "/v1/topics")
    return reply.status, reply.json().get("detail", "") if reply.status != 200 else ""


def test_a_password_change_refuses_older_tokens_and_a_fresh_one_works(http, admin):
    user = make_user(http, admin, "rv.pw")
    assert user.call("GET", "/v1/topics").status == 200
    user.json("PUT", "/v1/users/rv.pw/password", 204, body={"password": "another-password-1",
                                                             "current_password": PASSWORD})
    status, detail = _token_detail(user)
    assert status == 401 and "revoked" in detail, detail
    assert http.call("POST", "/v1/auth/token", body={"username": "rv.pw", "password": PASSWORD}).status == 401
    fresh = As(http, login(http, "rv.pw", "another-password-1"))
    assert fresh.call("GET", "/v1/topics").status == 200


def test_a_name_deleted_and_created_again_refuses_the_old_users_tokens(http, admin):
    old = make_user(http, admin, "rv.again")
    assert old.call("GET", "/v1/topics").status == 200
    admin.json("DELETE", "/v1/users/rv.again")
    admin.json("POST", "/v1/users", 201, body={"username": "rv.again", "password": PASSWORD, "role": "admin"})
    status, detail = _token_detail(old)
    assert status == 401 and "earlier user" in detail, detail
    assert old.call("GET", "/v1/users").status == 401, "the old token must not get the new user's role"
    new = As(http, login(http, "rv.again", PASSWORD))
    assert new.call("GET", "/v1/users").status == 200


def test_an_admin_revokes_a_users_tokens(http, admin):
    user, other = make_user(http, admin, "rv.revoked"), make_user(http, admin, "rv.bystander")
    second = As(http, login(http, "rv.revoked", PASSWORD))
    assert user.call("POST", "/v1/users/rv.bystander/revoke-tokens").status == 403
    assert http.call("POST", "/v1/users/rv.bystander/revoke-tokens").status == 401
    assert admin.call("POST", "/v1/users/nobody/revoke-tokens").status == 404
    answer = admin.json("POST", "/v1/users/rv.revoked/revoke-tokens")
    assert answer == {"user": "rv.revoked", "credential_version": 1}
    for token in (user, second):
        status, detail = _token_detail(token)
        assert status == 401 and "revoked" in detail, detail
    assert other.call("GET", "/v1/topics").status == 200, "another user's tokens are untouched"
    assert As(http, login(http, "rv.revoked", PASSWORD)).call("GET", "/v1/topics").status == 200


def _shared_topic(admin: As, http: Http, prefix: str) -> tuple[As, As, str]:
    owner, reader = make_user(http, admin, f"{prefix}.owner"), make_user(http, admin, f"{prefix}.reader")
    topic = f"{prefix}.topic"
    owner.json("POST", "/v1/topics", 201, body={"name": topic})
    owner.json("PUT", f"/v1/topics/{topic}/acl", body={"user": f"{prefix}.reader", "permissions": ["read"]})
    return owner, reader, topic


def _send(user: As, topic: str, value: str) -> None:
    user.json("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": value}]})


def test_a_stream_ends_with_an_error_event_once_read_is_revoked(http, admin):
    owner, reader, topic = _shared_topic(admin, http, "rv.s")
    stream = Sse(http, f"/v1/topics/{topic}/partitions/0/stream?offset=0&keepalive_ms=60000", reader.token)
    try:
        _send(owner, topic, "before")
        kind, data = stream.next_event() or ("", None)
        assert kind == "record" and data["value"] == "before"
        owner.json("PUT", f"/v1/topics/{topic}/acl", body={"user": "rv.s.reader", "permissions": []})
        revoked_at = time.monotonic()
        kind, data = stream.next_event() or ("", None)
        assert kind == "error", (kind, data)
        assert data["status"] == 403 and data["code"] == "forbidden" and "read" in data["detail"]
        assert time.monotonic() - revoked_at < STREAM_TIMEOUT_S
        _send(owner, topic, "after")
        assert stream.next_event() is None, "the stream is closed after the error event"
    finally:
        stream.close()


def test_a_stream_ends_when_its_token_is_revoked_even_with_records_flowing(http, admin):
    owner, reader, topic = _shared_topic(admin, http, "rv.t")
    stream = Sse(http, f"/v1/topics/{topic}/partitions/0/stream?offset=0", reader.token)
    try:
        _send(owner, topic, "first")
        assert (stream.next_event() or ("", None))[0] == "record"
        admin.json("POST", "/v1/users/rv.t.reader/revoke-tokens")
        _send(owner, topic, "secret")
        kind, data = stream.next_event() or ("", None)
        assert kind == "error" and data["status"] == 401, (kind, data)
        assert stream.next_event() is None
    finally:
        stream.close()


def test_a_member_stream_ends_once_read_is_revoked(http, admin):
    owner, reader, topic = _shared_topic(admin, http, "rv.m")
    member = reader.json("POST", "/v1/groups/rv.mg/members", body={"topics": [topic]})
    stream = Sse(http, f"/v1/groups/rv.mg/members/{member['member_id']}/stream", reader.token)
    try:
        assert (stream.next_event() or ("", None))[0] == "assignment"
        _send(owner, topic, "shared")
        kind, data = stream.next_event() or ("", None)
        assert kind == "record" and data["value"] == "shared"
        owner.json("PUT", f"/v1/topics/{topic}/acl", body={"user": "rv.m.reader", "permissions": []})
        kind, data = stream.next_event() or ("", None)
        assert kind == "error" and data["status"] == 403, (kind, data)
        assert stream.next_event() is None
    finally:
        stream.close()


def test_a_long_poll_answers_403_when_read_is_revoked_while_it_waits(http, admin):
    owner, reader, topic = _shared_topic(admin, http, "rv.lp")
    replies: list[Any] = []
    poll = threading.Thread(target=lambda: replies.append(
        reader.call("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0&wait_ms=10000")))
    poll.start()
    try:
        time.sleep(0.5)  # let the long-poll start waiting; if it has not yet, it is refused up front
        owner.json("PUT", f"/v1/topics/{topic}/acl", body={"user": "rv.lp.reader", "permissions": []})
        _send(owner, topic, "secret")
    finally:
        poll.join(STREAM_TIMEOUT_S)
    assert replies and replies[0].status == 403, replies
    assert b"secret" not in replies[0].data


def test_the_python_client_raises_the_streams_error_event(http, node, admin):
    owner, reader, topic = _shared_topic(admin, http, "rv.c")

    async def main() -> LogBrokerError:
        async with Client(node.url, token=reader.token) as client, client.stream(topic, 0, offset=0) as events:
            owner.json("PUT", f"/v1/topics/{topic}/acl", body={"user": "rv.c.reader", "permissions": []})
            with pytest.raises(LogBrokerError) as raised:
                async for _ in events:
                    pass
            return raised.value

    error = asyncio.run(main())
    assert (error.status, error.code) == (403, "forbidden")
