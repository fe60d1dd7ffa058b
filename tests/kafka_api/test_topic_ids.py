"""Topic ids on a real node's Kafka listener (auth on, decision 0398): Metadata answers each
topic's id and finds topics by id, Fetch v13 reads by id, CreateTopics v7 answers the new id,
DeleteTopics v6 deletes by id; librdkafka's consumer reads through ids. Hostile ids (random,
zero, another user's topic, a deleted topic's) name nothing, and a caller learns nothing about an
id it may not see. Raw frames (kio) over a socket, so each version is the one the test names.

Users: ``ann`` owns the topics, ``bob`` has no grant, ``cid`` may write (so describe) but not read."""

from __future__ import annotations

import logging
import re
import socket
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.local import LocalCoordinator
from coordinator.models import NodeInfo, PartitionState, TopicSpec
from kafka_api import entities, handlers, topic_ids
from kafka_api.apis import BY_KEY
from segments.config import LogConfig
from tests.http_api.conftest import Http
from tests.kafka_api.test_listener import TIMEOUT_S, encode_body, raw_connection, sasl, send_request
from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.nodes import NodeProcess

PASSWORD = "a-topic-ids-test-password"
UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED = 100, 29
ZERO = uuid.UUID(int=0)
APIS_FETCH = BY_KEY[1]


@pytest.fixture(scope="module")
def users(http, admin_token) -> list[str]:
    for name in ("ann", "bob", "cid"):
        http.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD},
                  headers=bearer(admin_token))
    return ["ann", "bob", "cid"]


@pytest.fixture(scope="module")
def ann_token(http, users) -> str:
    return login(http, "ann", PASSWORD)


def make_topic(http: Http, token: str, name: str, records: list[str], partitions: int = 1) -> uuid.UUID:
    """A topic of ann's with ``records`` in partition 0, ``cid`` granted write: its id."""
    http.json("POST", "/v1/topics", 201, body={"name": name, "partitions": partitions}, headers=bearer(token))
    http.json("PUT", f"/v1/topics/{name}/acl", body={"user": "cid", "permissions": ["write"]},
              headers=bearer(token))
    if records:
        http.json("POST", f"/v1/topics/{name}/records", headers=bearer(token),
                  body={"records": [{"value": value, "partition": 0} for value in records]})
    return uuid.UUID(hex=http.json("GET", f"/v1/topics/{name}?offsets=false", headers=bearer(token))["topic_id"])


def connect(node: NodeProcess, username: str) -> socket.socket:
    sock = raw_connection(node)
    sock.settimeout(TIMEOUT_S)
    password = ADMIN_PASSWORD if username == ADMIN else PASSWORD
    send_request(sock, 17, 1, encode_body(17, 1, {"mechanism": "PLAIN"}))
    answer = send_request(sock, 36, 2, encode_body(36, 2, {"auth_bytes": f"\x00{username}\x00{password}".encode()}))
    assert answer.error_code.value == 0
    return sock


def call(node: NodeProcess, username: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
    with connect(node, username) as sock:
        return send_request(sock, api_key, version, encode_body(api_key, version, values))


def metadata(node: NodeProcess, username: str, *wanted: str | uuid.UUID) -> list[Any]:
    topics = [{"name": None, "topic_id": w} if isinstance(w, uuid.UUID) else {"name": w, "topic_id": ZERO}
              for w in wanted]
    return list(call(node, username, 3, 12, {"topics": topics, "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False}).topics)


def fetch(node: NodeProcess, username: str, *ids: uuid.UUID, partitions: tuple[int, ...] = (0,),
          version: int = 13) -> list[Any]:
    return list(call(node, username, 1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1_000_000, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic_id": i, "partitions": [{"partition": p, "fetch_offset": 0,
                                                   "partition_max_bytes": 1_000_000} for p in partitions]}
                   for i in ids]}).responses)


def codes(topic: Any) -> list[int]:
    return [int(p.error_code.value) for p in topic.partitions]


# ---- Metadata ----------------------------------------------------------------------------------

def test_metadata_answers_each_topics_id_and_finds_it_by_id(node, http, ann_token):
    topic_id = make_topic(http, ann_token, "ids-meta", [], partitions=2)
    (by_name,) = metadata(node, "ann", "ids-meta")
    assert by_name.error_code.value == 0 and by_name.topic_id == topic_id
    (by_id,) = metadata(node, "ann", topic_id)
    assert (by_id.error_code.value, by_id.name, by_id.topic_id) == (0, "ids-meta", topic_id)
    assert [p.partition_index for p in by_id.partitions] == [0, 1]
    assert metadata(node, "cid", topic_id)[0].name == "ids-meta", "a grantee sees the topic by id"


def test_an_id_the_caller_may_not_see_reads_as_an_unknown_one(node, http, ann_token):
    topic_id = make_topic(http, ann_token, "ids-hidden", [])
    (by_name,) = metadata(node, "bob", "ids-hidden")
    assert by_name.error_code.value == TOPIC_AUTHORIZATION_FAILED, "by name: refused, as an unknown name is"
    hidden, unknown, zero = metadata(node, "bob", topic_id, uuid.uuid4(), ZERO)
    for answer in (hidden, unknown, zero):
        assert (answer.error_code.value, answer.name, answer.partitions) == (UNKNOWN_TOPIC_ID, None, ())
    assert hidden.topic_id == topic_id
    (admins,) = metadata(node, ADMIN, uuid.uuid4())
    assert admins.error_code.value == UNKNOWN_TOPIC_ID


# ---- Fetch -------------------------------------------------------------------------------------

def test_fetch_v13_reads_a_topic_by_its_id_and_answers_with_it(node, http, ann_token):
    topic_id = make_topic(http, ann_token, "ids-fetch", ["one", "two"])
    for version in (13, 14, 15, 16):
        (answer,) = fetch(node, "ann", topic_id, version=version)
        assert answer.topic_id == topic_id and codes(answer) == [0]
        assert answer.partitions[0].high_watermark == 2 and b"two" in answer.partitions[0].records


def test_fetch_by_an_id_naming_nothing_is_unknown_topic_id_on_each_partition(node, http, ann_token):
    topic_id = make_topic(http, ann_token, "ids-fetch-mixed", ["x"])
    random_id = uuid.uuid4()
    known, random, zero = fetch(node, "ann", topic_id, random_id, ZERO, partitions=(0, 5))
    assert codes(known) == [0, 3], "a partition the topic has not: UNKNOWN_TOPIC_OR_PARTITION, as by name"
    assert (random.topic_id, codes(random)) == (random_id, [UNKNOWN_TOPIC_ID] * 2)
    assert codes(zero) == [UNKNOWN_TOPIC_ID] * 2
    assert all(p.records == b"" and p.high_watermark == -1 for p in random.partitions), "empty, never null"


def test_fetch_by_id_hides_a_topic_from_who_may_not_see_it_and_refuses_who_may(node, http, ann_token):
    topic_id = make_topic(http, ann_token, "ids-fetch-auth", ["secret"])
    (bobs,) = fetch(node, "bob", topic_id)
    (bobs_random,) = fetch(node, "bob", uuid.uuid4())
    assert codes(bobs) == codes(bobs_random) == [UNKNOWN_TOPIC_ID], "bob cannot tell it from a random id"
    assert bobs.partitions[0].records == b""
    (cids,) = fetch(node, "cid", topic_id)
    assert codes(cids) == [TOPIC_AUTHORIZATION_FAILED], "cid sees the topic (write): refused, as by name"


def test_a_topic_deleted_and_made_again_is_not_read_through_its_old_id(node, http, ann_token):
    old_id = make_topic(http, ann_token, "ids-again", ["old"])
    http.call("DELETE", "/v1/topics/ids-again", headers=bearer(ann_token))
    new_id = make_topic(http, ann_token, "ids-again", ["new-1", "new-2"])
    assert new_id != old_id
    (old,) = fetch(node, "ann", old_id)
    assert codes(old) == [UNKNOWN_TOPIC_ID] and old.partitions[0].records == b""
    (new,) = fetch(node, "ann", new_id)
    assert codes(new) == [0] and b"new-2" in new.partitions[0].records
    assert metadata(node, "ann", old_id)[0].error_code.value == UNKNOWN_TOPIC_ID
    assert metadata(node, "ann", new_id)[0].name == "ids-again"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.uuids() | st.just(ZERO), st.lists(st.integers(-3, 40), min_size=1, max_size=4,
                                                                 unique=True)), min_size=1, max_size=5),
       st.integers(13, 16))
def test_ids_naming_no_topic_answer_unknown_on_every_partition_in_request_order(node, users, wanted, version):
    with connect(node, "bob") as sock:
        answer = send_request(sock, 1, version, encode_body(1, version, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1_000, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic_id": i, "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 10}
                                                      for p in parts]} for i, parts in wanted]}))
    assert [(t.topic_id or ZERO, [p.partition_index for p in t.partitions]) for t in answer.responses] == wanted
    assert all(codes(t) == [UNKNOWN_TOPIC_ID] * len(t.partitions) for t in answer.responses)


# ---- CreateTopics and DeleteTopics ---------------------------------------------------------------

def test_create_topics_v7_answers_the_new_topics_id(node, http, ann_token):
    answer = call(node, "ann", 19, 7, {"topics": [{"name": "ids-created", "num_partitions": 1,
                                                   "replication_factor": 1, "assignments": [], "configs": []}],
                                       "timeout": 5_000, "validate_only": False})
    (made,) = answer.topics
    stored = http.json("GET", "/v1/topics/ids-created?offsets=false", headers=bearer(ann_token))["topic_id"]
    assert made.error_code.value == 0 and made.topic_id == uuid.UUID(hex=stored)


def delete_by_id(node: NodeProcess, username: str, topic_id: uuid.UUID) -> Any:
    (answer,) = call(node, username, 20, 6, {"topics": [{"name": None, "topic_id": topic_id}],
                                             "timeout": 5_000}).responses
    return answer


def test_delete_topics_v6_deletes_by_id_for_the_owner_alone(node, http, admin_token, ann_token):
    topic_id = make_topic(http, ann_token, "ids-deleted", ["x"])
    bobs = delete_by_id(node, "bob", topic_id)
    assert (bobs.error_code.value, bobs.name) == (UNKNOWN_TOPIC_ID, None), "bob cannot see it: unknown"
    cids = delete_by_id(node, "cid", topic_id)
    assert cids.error_code.value == TOPIC_AUTHORIZATION_FAILED, "cid sees it: refused, as by name"
    assert http.call("GET", "/v1/topics/ids-deleted", headers=bearer(ann_token)).status == 200
    anns = delete_by_id(node, "ann", topic_id)
    assert (anns.error_code.value, anns.name, anns.topic_id) == (0, "ids-deleted", topic_id)
    assert http.call("GET", "/v1/topics/ids-deleted", headers=bearer(admin_token)).status == 404
    assert delete_by_id(node, "ann", topic_id).error_code.value == UNKNOWN_TOPIC_ID
    assert delete_by_id(node, ADMIN, ZERO).error_code.value == UNKNOWN_TOPIC_ID


def test_delete_by_an_old_id_leaves_the_topic_made_again(node, http, ann_token):
    old_id = make_topic(http, ann_token, "ids-kept", [])
    http.call("DELETE", "/v1/topics/ids-kept", headers=bearer(ann_token))
    make_topic(http, ann_token, "ids-kept", ["kept"])
    assert delete_by_id(node, "ann", old_id).error_code.value == UNKNOWN_TOPIC_ID
    assert http.call("GET", "/v1/topics/ids-kept", headers=bearer(ann_token)).status == 200


# ---- a real client ---------------------------------------------------------------------------------

def test_librdkafka_reads_through_topic_ids(node, http, ann_token):
    """librdkafka 2.16 asks for Fetch up to v16, the newest advertised: it names topics by id, and
    reads what was written."""
    make_topic(http, ann_token, "ids-librdkafka", ["by-id"])
    sent: list[str] = []

    class Sent(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.extend(re.findall(r"Sent FetchRequest \(v(\d+)", record.getMessage()))

    logger = logging.getLogger("tests.kafka_api.topic_ids.librdkafka")
    logger.addHandler(Sent())
    logger.setLevel(logging.DEBUG)
    consumer = Consumer(sasl(node, "ann", PASSWORD, **{"group.id": "ids-readers", "auto.offset.reset": "earliest",
                                                        "debug": "protocol", "logger": logger}))
    try:
        consumer.subscribe(["ids-librdkafka"])
        got = None
        deadline = time.monotonic() + TIMEOUT_S
        while got is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got = message.value()
    finally:
        consumer.close()
    assert got == b"by-id"
    assert sent and {int(v) for v in sent} == {APIS_FETCH.max_version}, f"Fetch versions sent: {sorted(set(sent))}"
    assert APIS_FETCH.max_version >= 13


def test_librdkafka_follows_a_topic_made_again_through_its_new_id(node, http, ann_token):
    """A consumer fetching by the old id of a topic deleted and made again gets UNKNOWN_TOPIC_ID
    (with empty records: a null record set is one librdkafka cannot parse, and it would fetch again
    for ever), asks Metadata, learns the new id and reads the new topic from its position."""
    make_topic(http, ann_token, "ids-followed", ["old"])
    consumer = Consumer(sasl(node, "ann", PASSWORD, **{"group.id": "ids-followers", "auto.offset.reset": "earliest",
                                                        "fetch.wait.max.ms": 500}))
    seen: list[bytes] = []

    def poll_until(value: bytes) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while value not in seen and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())

    try:
        consumer.subscribe(["ids-followed"])
        poll_until(b"old")
        http.call("DELETE", "/v1/topics/ids-followed", headers=bearer(ann_token))
        make_topic(http, ann_token, "ids-followed", ["new-0", "new-1"])  # the consumer's position is 1
        poll_until(b"new-1")
    finally:
        consumer.close()
    assert seen == [b"old", b"new-1"]


# ---- resolution, pure ------------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_resolve_finds_live_kafka_topics_only(tmp_path):
    coordinator = LocalCoordinator(str(tmp_path), NodeInfo(1, "http://127.0.0.1:1", "127.0.0.1:2"))
    await coordinator.start()
    topic = await coordinator.create_topic(TopicSpec.parse({"name": "t"}, base_config=LogConfig()), owner=None)
    queue = await coordinator.create_topic(TopicSpec.parse({"name": "q", "kind": "queue"}, base_config=LogConfig()),
                                           owner=None)
    assert topic_ids.resolve(coordinator, uuid.UUID(hex=topic.topic_id)) == topic
    assert topic_ids.topic_uuid(topic) == uuid.UUID(hex=topic.topic_id)
    assert topic_ids.resolve(coordinator, uuid.UUID(hex=queue.topic_id)) is None, "a queue is no Kafka topic"
    for hostile in (None, ZERO, uuid.uuid4()):
        assert topic_ids.resolve(coordinator, hostile) is None
    await coordinator.delete_topic("t")
    assert topic_ids.resolve(coordinator, uuid.UUID(hex=topic.topic_id)) is None
    assert topic_ids.as_uuid("not-hex") == ZERO


class _Cluster:
    """What the leader hints read from the coordinator's cache: partition 0 of "t" led by node 2."""

    def cached_partition(self, topic: str, partition: int) -> PartitionState | None:
        return PartitionState(topic, 0, (1, 2), (1, 2), 2, 7) if (topic, partition) == ("t", 0) else None

    def cached_node(self, node_id: int) -> NodeInfo | None:
        return NodeInfo(2, "http://n2", "n2:1", rack="r2", kafka_address="[::1]:9093") if node_id == 2 else None


def test_a_partition_answered_not_leader_names_its_leader_and_where_it_is():
    """KIP-951 (Fetch v16): NOT_LEADER_OR_FOLLOWER names the leader and epoch the cache knows, and
    the answer gives that leader's Kafka address; a partition with no known leader names none."""
    cluster: Any = _Cluster()
    leaders: set[int] = set()
    moved = handlers._fetch_error(0, 6)
    handlers._hint_leader(cluster, "t", 0, moved, leaders)
    unknown = handlers._fetch_error(1, 6)
    handlers._hint_leader(cluster, "t", 1, unknown, leaders)
    assert moved["current_leader"] == {"leader_id": 2, "leader_epoch": 7} and "current_leader" not in unknown
    endpoints = handlers._endpoints(cluster, leaders | {3})
    assert endpoints == [{"node_id": 2, "host": "::1", "port": 9093, "rack": "r2"}]
    answer = entities.build(entities.response_class(1, 16), {
        "throttle_time": 0, "error_code": 0, "session_id": 0, "node_endpoints": endpoints,
        "responses": [{"topic_id": uuid.uuid4(), "partitions": [moved, unknown]}]})
    assert answer.node_endpoints[0].port == 9093 and answer.responses[0].partitions[0].current_leader.leader_epoch == 7
    assert entities.encode(answer)
