"""Write identities belong to their writer (decision 0245): an ``Idempotency-Key`` names a write
within the authenticated user's namespace, and a prebuilt batch may carry only a producer id the
broker issued to its sender. user-b, holding a write grant on user-a's topic, can neither take
user-a's keys, block them, learn where user-a's records went, nor write under user-a's producer
id. Through a real node with auth on; every test here fails on a broker that shares keys and
trusts producer ids."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from logbroker.client import Client, Producer
from logbroker.producer_ids import KEY_EPOCH, writer_of, writer_tag
from segments.batch import ProducerRecord, encode_batch
from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.nodes import NodeProcess

BATCH = "application/vnd.logbroker.batch"
DEDUP_ENTRIES_MAX = 16  # idempotent writes a partition remembers: small, so a flood is quick to send


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("writers")), *AUTH_ARGS,
                     "--dedup-entries-max", str(DEDUP_ENTRIES_MAX)) as process:
        yield process


@pytest.fixture(scope="module")
def users(http: Http) -> tuple[As, As]:
    admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
    return make_user(http, admin, "writer-a"), make_user(http, admin, "writer-b")


def _shared_topic(owner: As, guest: As, name: str) -> None:
    owner.json("POST", "/v1/topics", 201, body={"name": name, "partitions": 1})
    owner.json("PUT", f"/v1/topics/{name}/acl", body={"user": "writer-b", "permissions": ["read", "write"]})


def _values(user: As, topic: str) -> list[str]:
    answer = user.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0")
    return [r["value"] for r in answer["records"]]


def _keyed(user: As, topic: str, values: list[str], key: str, expect: int = 200, path: str = "topics") -> object:
    return user.json("POST", f"/v1/{path}/{topic}/{'records' if path == 'topics' else 'messages'}?acks=all",
                     expect, body={"records": [{"value": v} for v in values]}, headers={"Idempotency-Key": key})


def test_the_same_key_of_two_writers_names_two_writes(users: tuple[As, As]):
    a, b = users
    _shared_topic(a, b, "shared-keys")
    by_b = _keyed(b, "shared-keys", ["from-b"], "order-17")
    by_a = _keyed(a, "shared-keys", ["from-a"], "order-17")
    assert by_a != by_b, "user-a's write is its own, not an answer of user-b's"
    assert _values(a, "shared-keys") == ["from-b", "from-a"]
    assert _keyed(a, "shared-keys", ["from-a"], "order-17") == by_a, "user-a's retry answers user-a's write"
    assert _keyed(b, "shared-keys", ["from-b"], "order-17") == by_b
    assert _values(a, "shared-keys") == ["from-b", "from-a"], "each stored once"


def test_another_writer_cannot_block_a_key_with_a_different_record_count(users: tuple[As, As]):
    a, b = users
    _shared_topic(a, b, "blocked-keys")
    _keyed(b, "blocked-keys", ["b1", "b2", "b3"], "invoice-9")
    _keyed(a, "blocked-keys", ["a1"], "invoice-9")  # 200, where a shared key space answered 409
    assert _values(a, "blocked-keys") == ["b1", "b2", "b3", "a1"]
    b.json("POST", "/v1/topics/blocked-keys/records", 409, body={"records": [{"value": "x"}]},
           headers={"Idempotency-Key": "invoice-9"})  # the same key of one writer still conflicts


def test_queue_sends_scope_their_keys_to_the_writer(users: tuple[As, As]):
    a, b = users
    a.json("POST", "/v1/topics", 201, body={"name": "shared-jobs", "partitions": 1, "kind": "queue"})
    a.json("PUT", "/v1/topics/shared-jobs/acl", body={"user": "writer-b", "permissions": ["read", "write"]})
    by_b = _keyed(b, "shared-jobs", ["job-b"], "job-1", path="queues")
    by_a = _keyed(a, "shared-jobs", ["job-a"], "job-1", path="queues")
    assert by_a != by_b
    got = a.json("POST", "/v1/queues/shared-jobs/receive", body={"max_messages": 10, "wait_ms": 500})
    assert sorted(m["value"] for m in got["messages"]) == ["job-a", "job-b"]


def _issued(user: As) -> tuple[int, int]:
    answer = user.json("POST", "/v1/producers")
    return answer["producer_id"], answer["producer_epoch"]


def test_producer_ids_are_issued_per_writer_and_refused_to_anyone_else(users: tuple[As, As]):
    a, b = users
    _shared_topic(a, b, "shared-batches")
    pid, epoch = _issued(a)
    assert pid > 0 and 0 <= epoch < KEY_EPOCH and _issued(a) != (pid, epoch), "a fresh identity each time"
    first = encode_batch([ProducerRecord(b"a-0")], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    stored = a.json("POST", "/v1/topics/shared-batches/records?partition=0", raw=first, content_type=BATCH)
    # user-b read user-a's identity from the raw batches and builds the next batch under it
    spoof = encode_batch([ProducerRecord(b"b-spoof")], producer_id=pid, producer_epoch=epoch, base_sequence=1)
    refused = b.call("POST", "/v1/topics/shared-batches/records?partition=0", raw=spoof, content_type=BATCH)
    assert refused.status == 403 and "not issued" in refused.json()["detail"]
    replay = b.call("POST", "/v1/topics/shared-batches/records?partition=0", raw=first, content_type=BATCH)
    assert replay.status == 403, "nor may user-b replay user-a's batch to learn where it went"
    following = encode_batch([ProducerRecord(b"a-1")], producer_id=pid, producer_epoch=epoch, base_sequence=1)
    second = a.json("POST", "/v1/topics/shared-batches/records?partition=0", raw=following, content_type=BATCH)
    assert second["offsets"][0]["offset"] == stored["offsets"][0]["offset"] + 1
    assert _values(a, "shared-batches") == ["a-0", "a-1"], "user-a's records, and only theirs"


def test_a_prebuilt_batch_cannot_forge_a_key_identity_or_a_negative_id(users: tuple[As, As]):
    a, b = users
    _shared_topic(a, b, "forged")
    pid, _ = _issued(b)
    forged = encode_batch([ProducerRecord(b"x")], producer_id=pid, producer_epoch=KEY_EPOCH, base_sequence=0)
    assert b.call("POST", "/v1/topics/forged/records?partition=0", raw=forged, content_type=BATCH).status == 403
    negative = encode_batch([ProducerRecord(b"x")], producer_id=-5, producer_epoch=0, base_sequence=0)
    assert b.call("POST", "/v1/topics/forged/records?partition=0", raw=negative, content_type=BATCH).status == 400
    assert _values(a, "forged") == []


def test_the_python_producer_writes_under_an_identity_issued_to_its_user(node: NodeProcess, users: tuple[As, As]):
    a, b = users
    _shared_topic(a, b, "client-ids")

    async def send(username: str) -> tuple[int, int]:
        async with Client(node.url, username=username, password="password-of-a-user") as client, \
                Producer(client, acks="all") as producer:
            meta = await producer.send_and_wait("client-ids", b"from-" + username.encode())
            return producer.producer_id, meta.offset

    pid_a, offset_a = asyncio.run(send("writer-a"))
    pid_b, offset_b = asyncio.run(send("writer-b"))
    assert (offset_a, offset_b) == (0, 1)
    assert (writer_of(pid_a), writer_of(pid_b)) == (writer_tag("writer-a"), writer_tag("writer-b")), "issued ids"


def test_another_writers_flood_of_keys_never_evicts_a_writers_entry(users: tuple[As, As]):
    """user-b sends many more keyed writes than the partition remembers: its own oldest entries go,
    user-a's one entry stays, so user-a's retry still answers its first write and stores nothing."""
    a, b = users
    _shared_topic(a, b, "flooded-keys")
    first = _keyed(a, "flooded-keys", ["a-once"], "payment-1")
    for n in range(4 * DEDUP_ENTRIES_MAX):
        _keyed(b, "flooded-keys", [f"b-{n}"], f"flood-{n}")
    assert _keyed(a, "flooded-keys", ["a-once"], "payment-1") == first
    assert _values(a, "flooded-keys").count("a-once") == 1
    _keyed(b, "flooded-keys", ["b-0"], "flood-0")
    assert _values(a, "flooded-keys").count("b-0") == 2, "user-b's oldest keys were the ones forgotten"
