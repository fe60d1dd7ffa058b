"""The Kafka listener of a real node (auth on), driven by real Kafka clients: librdkafka through
``confluent-kafka``, and ``kcat``; plus a raw socket for what no client sends.

One node per module, with ``--kafka-port 0``; every client authenticates with SASL PLAIN (or
OAUTHBEARER carrying a LogBroker token)."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.serial import entity_reader

from kafka_api import entities, record_batch
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.kafka_decoder import decode_batches
from tests.support.nodes import NodeProcess

USER, USER_PASSWORD = "kafka-user", "kafka-user-password"
TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("kafka-node")), *AUTH_ARGS, "--kafka-port", "0",
                     "--access-recheck-ms", "300") as process:
        yield process


@pytest.fixture(scope="module")
def user(http, admin_token) -> str:
    http.json("POST", "/v1/users", 201, body={"username": USER, "password": USER_PASSWORD},
              headers=bearer(admin_token))
    return USER


def sasl(node: NodeProcess, username: str = ADMIN, password: str = ADMIN_PASSWORD, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": node.kafka_address, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": username, "sasl.password": password, **extra}


def create_topic(http: Http, token: str, name: str, partitions: int = 1) -> None:
    http.json("POST", "/v1/topics", 201, body={"name": name, "partitions": partitions}, headers=bearer(token))


def produce(node: NodeProcess, topic: str, records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]], *,
            partition: int = 0, **config: Any) -> list[Any]:
    producer = Producer(sasl(node, **config))
    delivered: list[Any] = []
    for key, value, headers in records:
        producer.produce(topic, value=value, key=key, headers=headers, partition=partition,
                         timestamp=1_700_000_000_000, on_delivery=lambda err, msg: delivered.append(err or msg))
    assert producer.flush(TIMEOUT_S) == 0
    return delivered


def consume(node: NodeProcess, topic: str, partition: int, count: int, **config: Any) -> list[Any]:
    consumer = Consumer(sasl(node, **{"group.id": "unused", "enable.auto.commit": False, **config}))
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message)
        return got
    finally:
        consumer.close()


def test_the_ready_line_and_the_cluster_view_give_the_kafka_address(node, http, admin_token):
    host, _, port = node.kafka_address.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    nodes = http.json("GET", "/v1/cluster", headers=bearer(admin_token))["nodes"]
    assert [n["kafka_address"] for n in nodes] == [node.kafka_address]


def test_kcat_lists_the_broker_and_a_topic_made_over_http(node, http, admin_token):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not on PATH: install Debian's kcat package (scripts/ensure-system-deps.sh)"
    create_topic(http, admin_token, "kcat-listed", partitions=3)
    out = subprocess.run([kcat, "-b", node.kafka_address, "-X", "security.protocol=SASL_PLAINTEXT",
                          "-X", "sasl.mechanisms=PLAIN", "-X", f"sasl.username={ADMIN}",
                          "-X", f"sasl.password={ADMIN_PASSWORD}", "-L", "-J", "-m", "10"],
                         capture_output=True, text=True, timeout=30, check=True)
    listed = json.loads(out.stdout)
    assert [b["id"] for b in listed["brokers"]] == [1]
    topic = next(t for t in listed["topics"] if t["topic"] == "kcat-listed")
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 for p in topic["partitions"])


def test_what_librdkafka_produces_reads_back_over_http(node, http, admin_token):
    create_topic(http, admin_token, "from-kafka", partitions=2)
    records = [(b"k%d" % i, b"value-%d" % i, [("h", b"x%d" % i)]) for i in range(5)]
    delivered = produce(node, "from-kafka", records, partition=1, **{"acks": "all"})
    assert [m.offset() for m in delivered] == [0, 1, 2, 3, 4]
    got = http.json("GET", "/v1/topics/from-kafka/partitions/1/records?offset=0", headers=bearer(admin_token))
    assert [(r["key"], r["value"]) for r in got["records"]] == [(f"k{i}", f"value-{i}") for i in range(5)]
    assert got["records"][0]["timestamp"] == 1_700_000_000_000
    assert got["records"][2]["headers"] in ([["h", "x2"]], [{"name": "h", "value": "x2"}])


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd", "snappy"])
def test_compressed_batches_are_stored_as_their_records(node, http, admin_token, compression):
    topic = f"compressed-{compression}"
    create_topic(http, admin_token, topic)
    delivered = produce(node, topic, [(None, b"v" * 200, []) for _ in range(50)],
                        **{"compression.type": compression, "linger.ms": 50})
    assert all(not isinstance(m, KafkaError) for m in delivered)
    got = consume(node, topic, 0, 50)
    assert [m.value() for m in got] == [b"v" * 200] * 50


def test_what_http_produces_librdkafka_consumes(node, http, admin_token):
    create_topic(http, admin_token, "to-kafka")
    body = {"records": [{"key": f"k{i}", "value": f"v{i}", "headers": [["n", f"h{i}"]], "partition": 0}
                        for i in range(7)]}
    http.json("POST", "/v1/topics/to-kafka/records?acks=1", body=body, headers=bearer(admin_token))
    got = consume(node, "to-kafka", 0, 7)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == \
        [(i, b"k%d" % i, b"v%d" % i, [("n", b"h%d" % i)]) for i in range(7)]


def test_a_consumer_waits_for_records_produced_later(node, http, admin_token):
    create_topic(http, admin_token, "long-poll")
    consumer = Consumer(sasl(node, **{"group.id": "unused", "fetch.wait.max.ms": 2000}))
    try:
        consumer.assign([TopicPartition("long-poll", 0, 0)])
        assert consumer.poll(1.0) is None
        http.json("POST", "/v1/topics/long-poll/records", body={"records": [{"value": "late"}]},
                  headers=bearer(admin_token))
        deadline = time.monotonic() + TIMEOUT_S
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.value() == b"late"
    finally:
        consumer.close()


def test_offsets_are_listed_earliest_and_latest(node, http, admin_token):
    create_topic(http, admin_token, "listed-offsets")
    produce(node, "listed-offsets", [(None, b"x", [])] * 4)
    consumer = Consumer(sasl(node, **{"group.id": "unused"}))
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("listed-offsets", 0), timeout=TIMEOUT_S)
        assert (low, high) == (0, 4)
    finally:
        consumer.close()


def test_oauthbearer_takes_a_logbroker_token(node, http, admin_token):
    create_topic(http, admin_token, "bearer-topic")
    config = {"bootstrap.servers": node.kafka_address, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "OAUTHBEARER"}
    producer = Producer({**config, "oauth_cb": lambda _: (admin_token, time.time() + 600)})
    delivered: list[Any] = []
    producer.produce("bearer-topic", b"by token", on_delivery=lambda err, msg: delivered.append(err or msg))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered[0].offset() == 0


def test_a_wrong_password_is_refused(node, http, admin_token):
    admin = AdminClient(sasl(node, password="not-the-password"))
    with pytest.raises(KafkaException) as failed:
        admin.list_topics(timeout=5)
    assert "auth" in str(failed.value).lower() or "transport" in str(failed.value).lower()


def test_a_user_without_a_grant_is_refused_the_topic(node, http, admin_token, user):
    create_topic(http, admin_token, "admins-only")
    delivered = produce(node, "admins-only", [(None, b"x", [])], username=user, password=USER_PASSWORD,
                        **{"message.timeout.ms": 5000})
    assert isinstance(delivered[0], KafkaError)
    assert delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    got = http.json("GET", "/v1/topics/admins-only/partitions/0/records?offset=0", headers=bearer(admin_token))
    assert got["records"] == []


def test_a_client_over_its_quota_is_slowed_not_failed(node, http, admin_token):
    """Kafka's way (KIP-219): a Produce or Fetch past the user's byte rate waits, and its answer says
    how long (``throttle_time_ms``); no record is refused for it."""
    http.json("POST", "/v1/users", 201, body={"username": "kafka-slow", "password": USER_PASSWORD},
              headers=bearer(admin_token))
    rate = 40_000
    http.json("PUT", "/v1/users/kafka-slow/quotas", body={"produce_bytes_per_s": rate, "fetch_bytes_per_s": rate},
              headers=bearer(admin_token))
    token = login(http, "kafka-slow", USER_PASSWORD)
    create_topic(http, token, "kafka-slow-topic")
    throttled: list[int] = []
    config = sasl(node, "kafka-slow", USER_PASSWORD, **{"batch.size": 20_000, "linger.ms": 5,
                  "throttle_cb": lambda event: throttled.append(int(event.throttle_time * 1000))})
    producer = Producer(config)
    failed: list[Any] = []
    started = time.monotonic()
    for _ in range(100):  # 100 kB: 1 s of burst, then 1.5 s at the rate
        producer.produce("kafka-slow-topic", value=b"x" * 1000, partition=0,
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0 and failed == []
    assert time.monotonic() - started > 1.0
    assert throttled and max(throttled) > 0
    got = consume(node, "kafka-slow-topic", 0, 100, username="kafka-slow", password=USER_PASSWORD,
                  throttle_cb=lambda event: throttled.append(-1),  # fetches of 20 kB: the later ones wait
                  **{"max.partition.fetch.bytes": 20_000, "fetch.max.bytes": 20_000, "message.max.bytes": 20_000})
    assert len(got) == 100 and -1 in throttled


# ---- what no client sends ---------------------------------------------------------------------

def raw_connection(node: NodeProcess) -> socket.socket:
    host, _, port = node.kafka_address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=5)


def api_versions_frame(version: int, correlation_id: int = 7) -> bytes:
    body = b"\x00\x00" if version >= 3 else b""  # empty compact strings and tags... (v3: name, version, tags)
    if version >= 3:
        body = b"\x01\x01\x00"  # client_software_name "", client_software_version "", no tags
    header = struct.pack(">hhih", 18, version, correlation_id, -1) + (b"\x00" if version >= 3 else b"")
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def read_answer(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_api_versions_answers_before_authentication(node):
    with raw_connection(node) as sock:
        sock.sendall(api_versions_frame(3))
        answer = read_answer(sock)
    assert struct.unpack(">ih", answer[:6]) == (7, 0)


def test_an_api_versions_past_ours_is_answered_unsupported_in_v0(node):
    with raw_connection(node) as sock:
        sock.sendall(api_versions_frame(99))
        answer = read_answer(sock)
    correlation_id, error = struct.unpack(">ih", answer[:6])
    assert (correlation_id, error) == (7, 35)


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 2**31 - 1),                                       # an absurd size
    struct.pack(">i", -5),                                              # a negative size
    struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),        # an unknown API
    struct.pack(">i", 10) + struct.pack(">hhih", 3, 12, 1, -1),         # metadata before authentication
    struct.pack(">i", 200_000) + struct.pack(">hhih", 18, 3, 1, -1),    # a large frame before authentication
    struct.pack(">i", 12) + struct.pack(">hhih", 17, 1, 1, -1) + b"\xff\xff",  # a body that does not decode
])
def test_what_no_client_sends_closes_the_connection_and_nothing_else(node, frame):
    with raw_connection(node) as sock:
        sock.sendall(frame)
        assert closed(sock)
    with raw_connection(node) as sock:  # the listener still answers
        sock.sendall(api_versions_frame(3))
        assert read_answer(sock)[:4] == struct.pack(">i", 7)


def test_an_idempotent_producer_gets_an_id_and_a_resent_batch_is_stored_once(node, http, admin_token):
    create_topic(http, admin_token, "idempotent")
    delivered = produce(node, "idempotent", [(None, b"once-%d" % i, []) for i in range(20)],
                        **{"enable.idempotence": True, "acks": "all"})
    assert [m.offset() for m in delivered] == list(range(20))
    # The same batch again, as a retry after a lost answer sends it: same producer id, epoch and sequence.
    producer_id, epoch = init_producer_id(node)
    batch = record_batch.encode_batch(0, [(1_700_000_000_000, None, b"retried", [])], producer_id=producer_id,
                                      producer_epoch=epoch, base_sequence=0)
    first = raw_produce(node, "idempotent", batch)
    again = raw_produce(node, "idempotent", batch)
    assert first == again == (0, 20)
    got = http.json("GET", "/v1/topics/idempotent/partitions/0/records?offset=20", headers=bearer(admin_token))
    assert [r["value"] for r in got["records"]] == ["retried"]


def authenticated(node: NodeProcess) -> socket.socket:
    """A raw connection past SASL PLAIN (handshake v1, authenticate v2) as the admin."""
    sock = raw_connection(node)
    send_request(sock, 17, 1, encode_body(17, 1, {"mechanism": "PLAIN"}))
    send_request(sock, 36, 2, encode_body(36, 2, {"auth_bytes": f"\x00{ADMIN}\x00{ADMIN_PASSWORD}".encode()}))
    return sock


def encode_body(api_key: int, version: int, values: dict[str, Any]) -> bytes:
    return entities.encode(entities.build(entities.request_class(api_key, version), values))


def send_request(sock: socket.socket, api_key: int, version: int, body: bytes) -> Any:
    flexible = entities.flexible(api_key, version)
    header = struct.pack(">hhih", api_key, version, 5, 8) + b"raw-test" + (b"\x00" if flexible else b"")
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    answer = read_answer(sock)
    offset = 4 + (1 if flexible and api_key != 18 else 0)
    cls = entities.response_class(api_key, version)
    entity, _ = entity_reader(cls)(answer, offset)
    return entity


def init_producer_id(node: NodeProcess) -> tuple[int, int]:
    with authenticated(node) as sock:
        answer = send_request(sock, 22, 4, encode_body(22, 4, {"transactional_id": None,
                                                               "transaction_timeout": 60_000,
                                                               "producer_id": -1, "producer_epoch": -1}))
    assert answer.error_code.value == 0 and answer.producer_id >= 0
    return int(answer.producer_id), int(answer.producer_epoch)


def test_an_idempotent_producers_batch_after_a_gap_is_refused(node, http, admin_token):
    """Kafka's broker holds an idempotent producer to gapless sequences per partition: a batch
    after a lost one is OUT_OF_ORDER_SEQUENCE_NUMBER (45) and nothing is stored; the one in line is."""
    create_topic(http, admin_token, "sequenced")
    producer_id, epoch = init_producer_id(node)

    def batch(sequence: int, count: int) -> bytes:
        return record_batch.encode_batch(0, [(1_700_000_000_000, None, b"s%d" % (sequence + i), [])
                                             for i in range(count)],
                                         producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)

    assert raw_produce(node, "sequenced", batch(0, 3)) == (0, 0)
    assert raw_produce(node, "sequenced", batch(5, 1))[0] == 45  # 3 and 4 never came
    assert raw_produce(node, "sequenced", batch(3, 2)) == (0, 3)
    got = http.json("GET", "/v1/topics/sequenced/partitions/0/records?offset=0", headers=bearer(admin_token))
    assert [r["value"] for r in got["records"]] == ["s0", "s1", "s2", "s3", "s4"]


def raw_produce(node: NodeProcess, topic: str, batch: bytes) -> tuple[int, int]:
    """One Produce v9 (acks=all) of ``batch`` to partition 0: (error code, base offset)."""
    with authenticated(node) as sock:
        answer = send_request(sock, 0, 9, encode_body(0, 9, {
            "transactional_id": None, "acks": -1, "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    (part,) = answer.responses[0].partition_responses
    return int(part.error_code.value), int(part.base_offset)


def test_fetch_stops_at_the_requests_max_bytes_after_the_first_batch(node, http, admin_token):
    create_topic(http, admin_token, "fetch-bounded", partitions=2)
    for partition in (0, 1):
        produce(node, "fetch-bounded", [(None, b"x" * 1000, [])] * 5, partition=partition)
    with authenticated(node) as sock:
        answer = send_request(sock, 1, 12, encode_body(1, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 100, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": "fetch-bounded", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1_000_000} for p in (0, 1)]}]}))
    first, second = answer.responses[0].partitions
    assert len(decode_batches(first.records, records_max=100, uncompressed_bytes_max=10**6)[0]
               .records) == 5, "the first batch goes whole, past max_bytes"
    assert second.records in (b"", None) and second.high_watermark == 5, "the next only says where it ends"


def test_a_failed_write_with_acks_0_closes_the_connection(node):
    batch = record_batch.encode_batch(0, [(1_700_000_000_000, None, b"x", [])])
    with authenticated(node) as sock:
        body = encode_body(0, 9, {"transactional_id": None, "acks": 0, "timeout": 1_000, "topic_data": [
            {"name": "no-such-topic", "partition_data": [{"index": 0, "records": batch}]}]})
        header = struct.pack(">hhih", 0, 9, 5, -1) + b"\x00"
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert closed(sock)


def test_a_producer_makes_its_topic_on_first_use_where_the_node_allows_it(tmp_path):
    with NodeProcess(str(tmp_path / "node"), *AUTH_ARGS, "--kafka-port", "0", "--auto-create", "on") as auto:
        delivered = produce(auto, "made-by-kafka", [(None, b"first", [])], **{"allow.auto.create.topics": True})
        assert delivered[0].offset() == 0
        token = login(Http(auto.url), ADMIN, ADMIN_PASSWORD)
        described = Http(auto.url).json("GET", "/v1/topics/made-by-kafka", headers=bearer(token))
        assert described["partition_count"] >= 1


def test_without_auto_create_an_unknown_topic_stays_unknown(node, http, admin_token):
    delivered = produce(node, "never-made", [(None, b"x", [])], **{"message.timeout.ms": 3000})
    assert isinstance(delivered[0], KafkaError)
    assert http.call("GET", "/v1/topics/never-made", headers=bearer(admin_token)).status == 404


def test_a_murmur2_topic_places_keys_where_kafka_producers_do(node, http, admin_token):
    http.json("POST", "/v1/topics", 201, body={"name": "murmur-keys", "partitions": 6,
                                                "config": {"key_hash": "murmur2"}}, headers=bearer(admin_token))
    keys = [b"user-%d" % i for i in range(30)]
    producer = Producer(sasl(node, **{"partitioner": "murmur2_random"}))
    placed: dict[bytes, int] = {}
    for key in keys:
        producer.produce("murmur-keys", value=b"kafka", key=key,
                         on_delivery=lambda err, msg: placed.__setitem__(msg.key(), msg.partition()))
    assert producer.flush(TIMEOUT_S) == 0
    answer = http.json("POST", "/v1/topics/murmur-keys/records", headers=bearer(admin_token),
                       body={"records": [{"key": k.decode(), "value": "http"} for k in keys]})
    assert [p["partition"] for p in answer["offsets"]] == [placed[k] for k in keys]
    assert len(set(placed.values())) > 1
    refused = http.call("PATCH", "/v1/topics/murmur-keys/config", body={"key_hash": "xxh3"},
                        headers=bearer(admin_token))
    assert refused.status in (400, 409) and "key_hash" in refused.data.decode()
    bad = http.call("POST", "/v1/topics", body={"name": "bad-hash", "config": {"key_hash": "md5"}},
                    headers=bearer(admin_token))
    assert bad.status == 400 and "key_hash" in bad.data.decode()


def test_a_kafka_producer_cannot_set_the_brokers_own_headers(node, http, admin_token):
    create_topic(http, admin_token, "reserved-headers")
    delivered = produce(node, "reserved-headers", [(None, b"forged", [("X-LogBroker-Dead-Letter-Of", b"q")])],
                        **{"message.timeout.ms": 5000})
    assert isinstance(delivered[0], KafkaError), "refused"
    got = http.json("GET", "/v1/topics/reserved-headers/partitions/0/records?offset=0", headers=bearer(admin_token))
    assert got["records"] == [], "nothing stored"
