"""The per-user storage quota through a real node with auth on: the bytes stored in what a user
owns are counted (shown in ``GET /v1/users/{name}``), and a write that would pass the owner's
``storage_bytes_max`` is refused 403 ``storage_quota_exceeded`` (not retriable, nothing stored)
on every produce path (JSON, msgpack, prebuilt batch, queue send, gRPC Publish), whoever writes,
while other users, the admin and anything unlimited keep writing; raising the limit or deleting
data lets the owner write again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import msgpack
import pytest

from grpc_api import stubs
from segments.batch import ProducerRecord, encode_batch
from tests.grpc_api.conftest import auth
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.grpc_calls import publish
from tests.support.nodes import NodeProcess

pb, _ = stubs.load()
LIMIT = 200_000  # the node's default storage_bytes_max here
VALUE = "v" * 10_000
POLL_DEADLINE_S = 10.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("storage")), *AUTH_ARGS,
                     "--quota-storage-bytes-max", str(LIMIT)) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> dict[str, str]:
    return bearer(login(http, ADMIN, ADMIN_PASSWORD))


def user(http: Http, admin: dict[str, str], name: str, quotas: dict[str, int] | None = None) -> dict[str, str]:
    http.json("POST", "/v1/users", 201, headers=admin,
              body={"username": name, "password": f"{name}-password", "quotas": quotas or {}})
    return bearer(login(http, name, f"{name}-password"))


def produce(http: Http, token: dict[str, str], topic: str, value: str = VALUE):
    return http.call("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": value}]}, headers=token)


def fill(http: Http, token: dict[str, str], topic: str):
    """Produce until refused (bounded): the refusal."""
    for _ in range(LIMIT // len(VALUE) + 5):
        reply = produce(http, token, topic)
        if reply.status != 200:
            return reply
    raise AssertionError("never refused")


def latest(http: Http, admin: dict[str, str], topic: str) -> int:
    return sum(p["latest_offset"] for p in http.json("GET", f"/v1/topics/{topic}", headers=admin)["partitions"])


def assert_exceeded(reply, owner: str, limit: int = LIMIT) -> None:
    assert reply.status == 403, (reply.status, reply.data[:300])
    problem = reply.json()
    assert problem["code"] == "storage_quota_exceeded" and problem["retriable"] is False
    assert problem["owner"] == owner and problem["limit"] == "storage_bytes_max"
    assert problem["limit_value"] == limit and problem["used_bytes"] <= limit
    assert "storage_bytes_max" in problem["detail"] and "retry-after" not in reply.headers


def wait_for(check, what: str) -> None:
    deadline = time.monotonic() + POLL_DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_writes_past_the_owners_storage_quota_are_refused_on_every_path(node, http, admin):
    ann, bob = user(http, admin, "ann"), user(http, admin, "bob")
    http.json("POST", "/v1/topics", 201, body={"name": "ann.t", "partitions": 2}, headers=ann)
    http.json("POST", "/v1/topics", 201, body={"name": "ann.q", "kind": "queue"}, headers=ann)
    http.json("PUT", "/v1/topics/ann.t/acl", body={"user": "bob", "permissions": ["write"]}, headers=ann)
    assert http.json("GET", "/v1/users/ann", headers=ann)["storage"] == {"used_bytes": 0, "limit_bytes": LIMIT}
    assert_exceeded(fill(http, ann, "ann.t"), "ann")
    stored = latest(http, admin, "ann.t")
    used = http.json("GET", "/v1/users/ann", headers=ann)["storage"]["used_bytes"]
    assert LIMIT - 2 * len(VALUE) < used <= LIMIT
    assert_exceeded(produce(http, bob, "ann.t"), "ann")  # the owner pays, whoever writes
    packed = msgpack.packb({"records": [{"value": b"x" * 20_000}]})
    assert_exceeded(http.call("POST", "/v1/topics/ann.t/records", raw=packed, content_type="application/x-msgpack",
                              headers=ann), "ann")
    batch = encode_batch([ProducerRecord(value=b"x" * 20_000)])
    assert_exceeded(http.call("POST", "/v1/topics/ann.t/records?partition=0", raw=batch,
                              content_type="application/vnd.logbroker.batch", headers=ann), "ann")
    assert_exceeded(http.call("POST", "/v1/queues/ann.q/messages", body={"records": [{"value": VALUE * 2}]},
                              headers=ann), "ann")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(publish(node.grpc_address, pb.PublishRequest(topic="ann.t", records=[
            pb.Record(value=b"x" * 20_000)]), auth(ann["Authorization"].removeprefix("Bearer "))))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert dict(refused.value.trailing_metadata() or ())["x-logbroker-error-code"] == "storage_quota_exceeded"
    assert latest(http, admin, "ann.t") == stored and latest(http, admin, "ann.q") == 0, "nothing was stored"
    # other users, and the admin, keep writing
    http.json("POST", "/v1/topics", 201, body={"name": "bob.t"}, headers=bob)
    assert produce(http, bob, "bob.t").status == 200
    http.json("POST", "/v1/topics", 201, body={"name": "admin.t"}, headers=admin)
    for _ in range(LIMIT // len(VALUE) + 2):
        assert produce(http, admin, "admin.t").status == 200, "admins store without limit"
    assert http.json("GET", f"/v1/users/{ADMIN}", headers=admin)["storage"]["limit_bytes"] == 0
    listed = {u["name"]: u["storage"] for u in http.json("GET", "/v1/users", headers=admin)["users"]}
    assert listed["ann"]["used_bytes"] == used and listed["bob"]["used_bytes"] > 0
    # an admin raises ann's limit: she writes again, up to it
    http.json("PUT", "/v1/users/ann/quotas", body={"storage_bytes_max": 2 * LIMIT}, headers=admin)
    assert produce(http, ann, "ann.t").status == 200
    assert http.json("GET", "/v1/users/ann", headers=ann)["storage"]["limit_bytes"] == 2 * LIMIT
    assert_exceeded(fill(http, ann, "ann.t"), "ann", 2 * LIMIT)


def test_deleting_what_a_user_owns_gives_their_space_back(node, http, admin):
    cid = user(http, admin, "cid", {"storage_bytes_max": 50_000})
    http.json("POST", "/v1/topics", 201, body={"name": "cid.t"}, headers=cid)
    assert_exceeded(fill(http, cid, "cid.t"), "cid", 50_000)
    http.json("DELETE", "/v1/topics/cid.t", 204, headers=cid)
    wait_for(lambda: http.json("GET", "/v1/users/cid", headers=cid)["storage"]["used_bytes"] == 0,
             "the deleted topic's bytes are no longer counted")
    http.json("POST", "/v1/topics", 201, body={"name": "cid.t2"}, headers=cid)
    assert produce(http, cid, "cid.t2").status == 200


def test_a_user_sees_only_their_own_storage(http, admin):
    dan = user(http, admin, "dan")
    assert http.call("GET", "/v1/users/ann", headers=dan).status == 403
    assert http.json("GET", "/v1/users/dan", headers=dan)["storage"] == {"used_bytes": 0, "limit_bytes": LIMIT}


def test_a_retry_of_a_stored_write_is_answered_as_the_first_near_the_limit(node, http, admin):
    eve = user(http, admin, "eve", {"storage_bytes_max": 30_000})
    http.json("POST", "/v1/topics", 201, body={"name": "eve.t"}, headers=eve)
    assert produce(http, eve, "eve.t").status == 200  # ~10 KB stored: room for one more such write, not two
    keyed = {**eve, "Idempotency-Key": "eve-order-1"}
    first = produce(http, keyed, "eve.t")
    assert first.status == 200
    again = produce(http, keyed, "eve.t")
    assert again.status == 200 and again.json() == first.json(), again.data[:300]
    assert_exceeded(produce(http, eve, "eve.t"), "eve", 30_000)
    issued = http.json("POST", "/v1/producers", headers=eve)
    batch = encode_batch([ProducerRecord(value=b"b" * 100)], producer_id=issued["producer_id"],
                         producer_epoch=issued["producer_epoch"], base_sequence=0)
    used = http.json("GET", "/v1/users/eve", headers=eve)["storage"]["used_bytes"]
    http.json("PUT", "/v1/users/eve/quotas", body={"storage_bytes_max": used + len(batch) + 10}, headers=admin)
    raw = {"raw": batch, "content_type": "application/vnd.logbroker.batch", "headers": eve}
    stored = http.call("POST", "/v1/topics/eve.t/records?partition=0", **raw)
    assert stored.status == 200, stored.data[:300]
    retried = http.call("POST", "/v1/topics/eve.t/records?partition=0", **raw)
    assert retried.status == 200 and retried.json() == stored.json(), retried.data[:300]
    assert latest(http, admin, "eve.t") == 3
