"""Dead letters bound by identity (decision 0173), with two real users on a node with
authentication on: a queue's dead letters go only to the topic it was bound to, by id, and only
while its owner may write there; no client can set the broker's own ``x-logbroker-*`` headers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import msgpack
import pytest

from segments.batch import ProducerRecord, encode_batch
from segments.compression import Codec
from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.nodes import NodeProcess

BATCH = "application/vnd.logbroker.batch"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("dead-letters")), *AUTH_ARGS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


@pytest.fixture(scope="module")
def users(http, admin) -> tuple[As, As]:
    return make_user(http, admin, "user-a"), make_user(http, admin, "user-b")


def _dead_letter_one(user: As, queue: str, value: str, headers: list | None = None) -> None:
    """Send one message and nack it once: the queue (max_deliveries 1) dead-letters it at once."""
    record: dict = {"value": value, **({"headers": headers} if headers else {})}
    user.json("POST", f"/v1/queues/{queue}/messages", body={"records": [record]})
    message = user.json("POST", f"/v1/queues/{queue}/receive", body={"max_messages": 1})["messages"][0]
    assert user.json("POST", f"/v1/queues/{queue}/nack", body={"receipts": [message["receipt"]]})["nacked"] == 1


def _done(user: As, queue: str) -> int:
    return user.json("GET", f"/v1/queues/{queue}")["partitions"][0]["done_below"]


def _records(user: As, topic: str) -> list[dict]:
    return user.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0")["records"]


def test_a_dead_letter_topic_deleted_and_recreated_by_another_user_gets_nothing(http, admin, users):
    user_a, user_b = users
    user_b.json("POST", "/v1/topics", 201, body={"name": "bq2", "kind": "queue", "config": {
        "dead_letter_topic": "payments", "max_deliveries": 1}})
    user_b.json("DELETE", "/v1/topics/payments", 204)
    user_a.json("POST", "/v1/topics", 201, body={"name": "payments"})
    assert user_b.call("POST", "/v1/topics/payments/records", body={"records": [{"value": "x"}]}).status == 403
    _dead_letter_one(user_b, "bq2", "expired")
    assert _done(user_b, "bq2") == 1, "the dead message is finished: withheld, never delivered again"
    assert user_b.json("POST", "/v1/queues/bq2/receive", body={"wait_ms": 100})["messages"] == []
    assert _records(user_a, "payments") == [], "nothing reached user-a's topic"


def test_an_explicit_dead_letter_topic_must_be_writable_by_the_queue_owner(http, admin, users):
    user_a, user_b = users
    user_a.json("POST", "/v1/topics", 201, body={"name": "a.dlq"})
    create = {"name": "bq3", "kind": "queue", "config": {"dead_letter_topic": "a.dlq", "max_deliveries": 1}}
    refused = user_b.call("POST", "/v1/topics", body=create)
    assert refused.status == 403, refused.data
    assert user_b.call("GET", "/v1/queues/bq3").status == 403 and admin.call("GET", "/v1/topics/bq3").status == 404
    user_a.json("PUT", "/v1/topics/a.dlq/acl", body={"user": "user-b", "permissions": ["write"]})
    user_b.json("POST", "/v1/topics", 201, body=create)
    assert user_b.json("GET", "/v1/queues/bq3")["dead_letter_topic_id"] == admin.json(
        "GET", "/v1/topics/a.dlq")["topic_id"]
    _dead_letter_one(user_b, "bq3", "first", headers=[["trace", "t1"]])
    [copied] = _records(user_a, "a.dlq")
    headers = {h["name"] if isinstance(h, dict) else h[0]: h["value"] if isinstance(h, dict) else h[1]
               for h in copied["headers"]}
    assert copied["value"] == "first" and headers["x-logbroker-queue"] == "bq3" and headers["trace"] == "t1"
    user_a.json("PUT", "/v1/topics/a.dlq/acl", body={"user": "user-b", "permissions": []})
    _dead_letter_one(user_b, "bq3", "second")
    assert _done(user_b, "bq3") == 2, "withheld once user-b lost write"
    assert [r["value"] for r in _records(user_a, "a.dlq")] == ["first"]


def test_the_broker_binds_the_id_itself(http, users):
    _, user_b = users
    body = {"name": "bq4", "kind": "queue", "config": {"dead_letter_topic_id": "0" * 32}}
    assert user_b.call("POST", "/v1/topics", body=body).status == 400


@pytest.mark.parametrize("name", ["x-logbroker-queue", "X-Logbroker-Partition", "x-logbroker-anything"])
def test_no_client_sets_the_brokers_own_headers(http, users, name):
    _, user_b = users
    if user_b.call("GET", "/v1/queues/bq5").status == 403:
        user_b.json("POST", "/v1/topics", 201, body={"name": "bq5", "kind": "queue"})
        user_b.json("POST", "/v1/topics", 201, body={"name": "bt5"})
    records = {"records": [{"value": "v", "headers": [[name, "forged"]]}]}
    packed = msgpack.packb({"records": [{"value": b"v", "headers": [[name, b"forged"]]}]}, use_bin_type=True)
    for path in ("/v1/queues/bq5/messages", "/v1/topics/bt5/records"):
        reply = user_b.call("POST", path, body=records)
        assert reply.status == 400 and "broker's own" in reply.json()["detail"], reply.data
        assert user_b.call("POST", path, raw=packed, content_type="application/x-msgpack").status == 400
    for codec in (Codec.NONE, Codec.ZSTD):
        batch = encode_batch([ProducerRecord(b"v", None, [(name, b"forged")])], codec=codec)
        reply = user_b.call("POST", "/v1/topics/bt5/records?partition=0", raw=batch, content_type=BATCH)
        assert reply.status == 400 and "broker's own" in reply.json()["detail"], reply.data
    assert _records(user_b, "bt5") == [] and user_b.json("GET", "/v1/queues/bq5")["partitions"][0]["next_offset"] == 0


def test_a_queue_from_before_bindings_is_bound_when_opened_and_keeps_its_binding(tmp_path):
    """A queue stored without a dead-letter id is bound, when the node opens it, to the topic its
    dead-letter name names then; a queue created now keeps its stored id across a restart."""
    data = str(tmp_path)
    with NodeProcess(data, "--auth", "off") as process:
        http = Http(process.url)
        http.json("POST", "/v1/topics", 201, body={"name": "old", "kind": "queue", "config": {"max_deliveries": 1}})
        http.json("POST", "/v1/topics", 201, body={"name": "new", "kind": "queue"})
        new_bound = http.json("GET", "/v1/queues/new")["dead_letter_topic_id"]
    path = os.path.join(data, "coordinator.json")
    with open(path) as f:
        state = json.load(f)
    del state["topics"]["old"]["config"]["dead_letter_topic_id"]
    with open(path, "w") as f:
        json.dump(state, f)
    with NodeProcess(data, "--auth", "off") as process:
        http = Http(process.url)
        assert http.json("GET", "/v1/queues/old")["dead_letter_topic_id"] == http.json(
            "GET", "/v1/topics/old.dlq")["topic_id"]
        assert http.json("GET", "/v1/queues/new")["dead_letter_topic_id"] == new_bound
        http.json("POST", "/v1/queues/old/messages", body={"records": [{"value": "poison"}]})
        message = http.json("POST", "/v1/queues/old/receive", body={})["messages"][0]
        http.json("POST", "/v1/queues/old/nack", body={"receipts": [message["receipt"]]})
        assert [r["value"] for r in http.json("GET", "/v1/topics/old.dlq/partitions/0/records?offset=0")[
            "records"]] == ["poison"]
