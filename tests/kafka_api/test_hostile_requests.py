"""Requests no client sends, against a real node's Kafka listener: valid requests of every API
served, cut short or with bytes changed (Hypothesis), and a compressed batch that unpacks past any
bound. Each is answered or its connection closed within a bound, and the listener goes on serving
everyone else. Auth is off here so that each example costs one connection, not a password check
(authentication's own refusals are in ``test_listener``)."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_api import entities, record_batch
from tests.kafka_api.test_listener import api_versions_frame, read_answer
from tests.support.nodes import NodeProcess

ANSWER_WAIT_S = 10.0
BODY_TIMEOUT_MS = 1_000


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("kafka-hostile")), "--kafka-port", "0",
                     "--request-body-bytes-max", str(1024 * 1024), "--fetch-wait-ms-max", "2000",
                     "--body-timeout-ms", str(BODY_TIMEOUT_MS)) as process:
        yield process


@pytest.fixture(scope="module")
def topic(node) -> str:
    from tests.http_api.conftest import Http
    Http(node.url).json("POST", "/v1/topics", 201, body={"name": "hostile", "partitions": 2})
    return "hostile"


def frame(api_key: int, version: int, values: dict[str, Any], correlation_id: int = 11) -> bytes:
    body = entities.encode(entities.build(entities.request_class(api_key, version), values))
    header = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"x"
    if entities.flexible(api_key, version):
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def valid_requests(topic: str, *, joins: bool = True) -> list[bytes]:
    batch = record_batch.encode_batch(0, [(1_700_000_000_000, b"k", b"v", [("h", b"x")])])
    return [
        frame(3, 12, {"topics": [{"name": topic, "topic_id": _zero()}], "allow_auto_topic_creation": False,
                      "include_topic_authorized_operations": False}),
        frame(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5_000,
                     "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}),
        frame(1, 12, {"replica_id": -1, "max_wait": 10, "min_bytes": 1, "max_bytes": 65_536, "isolation_level": 0,
                      "session_id": 0, "session_epoch": -1, "rack_id": "",
                      "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                   "partition_max_bytes": 65_536}]}],
                      "forgotten_topics_data": []}),
        frame(1, 16, {"max_wait": 10, "min_bytes": 1, "max_bytes": 65_536, "isolation_level": 0,
                      "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                      "topics": [{"topic_id": _random_id(), "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                             "partition_max_bytes": 65_536}]}]}),
        frame(3, 12, {"topics": [{"name": None, "topic_id": _random_id()}], "allow_auto_topic_creation": False,
                      "include_topic_authorized_operations": False}),
        frame(20, 6, {"topics": [{"name": None, "topic_id": _random_id()}], "timeout": 5_000}),
        frame(2, 6, {"replica_id": -1, "isolation_level": 0,
                     "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
        *([frame(11, 7, {"group_id": "hostile-g", "session_timeout": 6_000, "rebalance_timeout": 1_000,
                      "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                      "protocols": [{"name": "range", "metadata": b"\x00\x01"}]})] if joins else []),
        frame(9, 7, {"group_id": "hostile-g", "topics": None, "require_stable": False}),
        frame(15, 5, {"groups": ["hostile-g", "hostile-unknown"], "include_authorized_operations": True}),
        frame(16, 5, {"states_filter": ["Stable", "Empty"], "types_filter": ["classic"]}),
        frame(19, 7, {"topics": [{"name": "made-" + topic, "num_partitions": 1, "replication_factor": 1,
                                  "assignments": [], "configs": []}], "timeout": 5_000, "validate_only": True}),
    ]


def _random_id() -> Any:
    import uuid
    return uuid.UUID(int=0x5EED_0000_0000_4000_8000_0000_0000_0001)


def _zero() -> Any:
    import uuid
    return uuid.UUID(int=0)


def exchange(node: NodeProcess, data: bytes) -> str:
    """Send ``data`` and then an ApiVersions request on the same connection: "answered" when the
    ApiVersions answer comes (after the first request's answer, or none: acks=0), "closed" when the
    connection is closed first; no answer and no close within the bound fails the test."""
    host, _, port = node.kafka_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(data + api_versions_frame(3))
        try:
            for _ in range(3):
                answer = read_answer(sock)
                if answer[:4] == struct.pack(">i", 7):
                    return "answered"
        except TimeoutError:
            raise AssertionError(f"no answer and no close within {ANSWER_WAIT_S} s") from None
        except (ConnectionError, OSError):
            return "closed"
    raise AssertionError("more answers than requests")


def still_serving(node: NodeProcess) -> None:
    host, _, port = node.kafka_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(api_versions_frame(3))
        assert read_answer(sock)[:4] == struct.pack(">i", 7)


def test_a_request_whose_body_stops_coming_is_closed_after_the_body_timeout(node):
    """A size, then part of the body, then nothing (a slow or stuck client): the connection is
    closed once ``--body-timeout-ms`` has passed (within the listener's watch period), not held
    for ever, and the node serves others meanwhile."""
    host, _, port = node.kafka_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(struct.pack(">i", 100) + api_versions_frame(3)[4:14])
        started = time.monotonic()
        still_serving(node)
        try:
            closed = sock.recv(1) == b""
        except ConnectionError:
            closed = True
        waited = time.monotonic() - started
    assert closed, "the stuck request got an answer"
    assert BODY_TIMEOUT_MS / 1000 - 0.05 <= waited <= BODY_TIMEOUT_MS / 1000 + 2.0, waited


def test_every_valid_request_is_answered(node, topic):
    for data in valid_requests(topic):
        assert exchange(node, data) == "answered"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_requests_cut_or_changed_are_answered_or_closed(node, topic, data):
    requests = valid_requests(topic, joins=False)  # a changed rebalance timeout may rightly hold a join
    original = data.draw(st.sampled_from(requests))
    mutated = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(4, len(mutated) - 1))
        mutated[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):  # and cut short, with its size prefix telling the cut length
        cut = data.draw(st.integers(14, len(mutated)))
        mutated = bytearray(struct.pack(">i", cut - 4)) + mutated[4:cut]
    assert exchange(node, bytes(mutated)) in ("answered", "closed")
    still_serving(node)
    assert not [line for line in node.stderr_lines if "kafka request failed" in line], \
        "a request that does not decode must be refused, not fail in a handler"


def test_a_compressed_bomb_is_refused_and_stores_nothing(node):
    from tests.http_api.conftest import Http
    # A topic of its own: the fuzzed requests of this module may store records in the shared one.
    topic = "hostile-bomb"
    Http(node.url).json("POST", "/v1/topics", 201, body={"name": topic, "partitions": 2})
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    payload = bomb.compress(b"\x00" * (64 * 1024 * 1024)) + bomb.flush()
    header = bytearray(record_batch.encode_batch(0, [(1_700_000_000_000, None, b"x", [])], compression=1))
    # The real records section replaced by the bomb, length and CRC made right again.
    batch = _with_records(bytes(header), payload)
    data = frame(0, 9, {"transactional_id": None, "acks": 1, "timeout": 5_000,
                        "topic_data": [{"name": topic, "partition_data": [{"index": 1, "records": batch}]}]})
    host, _, port = node.kafka_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(data)
        answer = read_answer(sock)
    error = _produce_error(answer)
    assert error == 10, "MESSAGE_TOO_LARGE: it decompresses past what one batch may hold"
    assert Http(node.url).json("GET", f"/v1/topics/{topic}/partitions/1/records?offset=0")["records"] == []
    still_serving(node)


def _with_records(batch: bytes, records: bytes) -> bytes:
    import crc32c
    fixed = bytearray(batch[:61])
    struct.pack_into(">i", fixed, 8, 61 - 12 + len(records))
    body = bytes(fixed[21:]) + records
    struct.pack_into(">I", fixed, 17, crc32c.crc32c(body))
    return bytes(fixed[:21]) + body


def _produce_error(answer: bytes) -> int:
    from kio.serial import entity_reader
    response, _ = entity_reader(entities.response_class(0, 9))(answer, 5)
    return int(response.responses[0].partition_responses[0].error_code.value)


def test_kafka_connections_take_from_the_http_listeners_budget(tmp_path):
    """The node's bound on connections counts both listeners' connections (an address's share
    counts the same way; loopback has none of its own, as for HTTP)."""
    with NodeProcess(str(tmp_path / "node"), "--kafka-port", "0", "--connections-max", "2") as small:
        host, _, port = small.kafka_address.rpartition(":")
        first = socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S)
        second = socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S)
        try:
            for sock in (first, second):
                sock.sendall(api_versions_frame(3))
                assert read_answer(sock)[:4] == struct.pack(">i", 7)
            with socket.create_connection((host, int(port)), timeout=ANSWER_WAIT_S) as third:
                third.sendall(api_versions_frame(3))
                with contextlib.suppress(ConnectionResetError):
                    assert third.recv(1) == b"", "a third connection is refused"
            from tests.http_api.conftest import Http
            try:  # the HTTP listener counts in the same budget: its connection is refused too
                status = Http(small.url).call("GET", "/readyz").status
            except (ConnectionError, OSError):
                status = None
            assert status != 200
        finally:
            first.close()
            second.close()
        still_serving(small)
