"""A produce refused on its input is charged to the caller's produce quota for the bytes the node
read, as a stored one is: large invalid bodies (JSON, msgpack, prebuilt batches, queue sends, a
body over the size limit) are not free. Through a real node with auth on."""

from __future__ import annotations

from collections.abc import Iterator

import msgpack
import pytest

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

RATE = 50_000  # bytes/s: the burst is one second of it
BODY_BYTES_MAX = 400_000
OVER = 150_000  # one refused body of this size puts the caller two seconds in debt


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("charged")), *AUTH_ARGS,
                     "--request-body-bytes-max", str(BODY_BYTES_MAX)) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> dict[str, str]:
    token = bearer(login(http, ADMIN, ADMIN_PASSWORD))
    http.json("POST", "/v1/topics", 201, body={"name": "charged"}, headers=token)
    http.json("POST", "/v1/topics", 201, body={"name": "charged.q", "kind": "queue"}, headers=token)
    return token


def writer(http: Http, admin: dict[str, str], name: str) -> dict[str, str]:
    """A new user with a produce quota of ``RATE`` and a write grant on both targets."""
    http.json("POST", "/v1/users", 201, headers=admin, body={
        "username": name, "password": f"{name}-password", "quotas": {"produce_bytes_per_s": RATE}})
    for target in ("charged", "charged.q"):
        http.json("PUT", f"/v1/topics/{target}/acl", body={"user": name, "permissions": ["write"]}, headers=admin)
    return bearer(login(http, name, f"{name}-password"))


BAD_BODIES = {
    "json": ("/v1/topics/charged/records", "application/json",
             b'{"records": [{"value": 1, "pad": "' + b"x" * OVER + b'"}]}'),
    "msgpack": ("/v1/topics/charged/records", "application/x-msgpack",
                msgpack.packb({"records": [{"value": 7, "pad": b"x" * OVER}]})),
    "batch": ("/v1/topics/charged/records?partition=0", "application/vnd.logbroker.batch", b"\x00" * OVER),
    "queue": ("/v1/queues/charged.q/messages", "application/json",
              b'{"records": "' + b"x" * OVER + b'"}'),
    "too_large": ("/v1/topics/charged/records", "application/json", b" " * (BODY_BYTES_MAX + OVER)),
}


@pytest.mark.parametrize("kind", sorted(BAD_BODIES))
def test_a_refused_produce_is_charged_for_what_was_read(http, admin, kind):
    path, content_type, raw = BAD_BODIES[kind]
    token = writer(http, admin, f"charged-{kind.replace('_', '-')}")
    refused = http.call("POST", path, raw=raw, content_type=content_type, headers=token)
    assert refused.status in (400, 413), (refused.status, refused.data[:200])
    assert refused.json()["code"] != "too_many_requests", refused.data[:300]
    after = http.call("POST", "/v1/topics/charged/records", body={"records": [{"value": "small"}]}, headers=token)
    assert after.status == 429, (kind, after.status, after.data[:200], refused.data[:300])
    assert after.json()["code"] == "too_many_requests" and int(after.headers["retry-after"]) >= 1
