"""Kafka batches stored as sent (decision 0389), on a real node: the stored bytes are Kafka's records
section under the broker's header, every other door reads them, a topic encrypted at rest seals them,
and batches of both formats share a partition."""

from __future__ import annotations

import glob
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from segments.batch import KAFKA_RECORDS_FLAG, decode_columns, iter_batches
from segments.key_ring import KeyRing, write_ring
from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess

TIMEOUT_S = 20.0
MARK = b"KAFKA-SECRET-PAYLOAD"
BATCH_TYPE = "application/vnd.logbroker.batch"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base = tmp_path_factory.mktemp("kafka-native")
    keys = str(base / "keys")
    write_ring(keys, KeyRing({1: os.urandom(32)}, 1))
    with NodeProcess(str(base / "data"), "--kafka-port", "0", "--encryption-keys-file", keys) as process:
        yield process


@pytest.fixture(scope="module")
def http(node: NodeProcess) -> Http:
    return Http(node.url)


def produce(node: NodeProcess, topic: str, records: list[tuple[bytes | None, bytes, list[tuple[str, Any]]]],
            **config: Any) -> None:
    producer = Producer({"bootstrap.servers": node.kafka_address, "linger.ms": 20, **config})
    failed: list[Any] = []
    for key, value, headers in records:
        producer.produce(topic, value=value, key=key, headers=headers, partition=0, timestamp=1_700_000_000_000,
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
    assert producer.flush(TIMEOUT_S) == 0 and not failed, failed


def consume(node: NodeProcess, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": node.kafka_address, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message)
        return got
    finally:
        consumer.close()


def raw_batches(node: NodeProcess, topic: str) -> bytes:
    request = urllib.request.Request(f"{node.url}/v1/topics/{topic}/partitions/0/records?offset=0",
                                     headers={"Accept": BATCH_TYPE})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return bytes(response.read())


def json_records(http: Http, topic: str) -> list[tuple[Any, ...]]:
    body = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0&max_records=1000")
    return [(r["offset"], r.get("key"), r["value"], r.get("headers")) for r in body["records"]]


@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
def test_a_kafka_batch_is_stored_as_sent_and_every_door_reads_it(node, http, compression):
    topic = f"native-{compression}"
    http.json("POST", "/v1/topics", 201, body={"name": topic, "config": {"encryption": "off"}})
    sent = [(b"k%d" % i, b"value-%d" % i, [("h", b"x%d" % i), ("n", None)]) for i in range(30)]
    produce(node, topic, sent, **{"compression.type": compression})
    data = raw_batches(node, topic)
    headers = [h for _, h in iter_batches(data)]
    assert headers and all(h.attributes & KAFKA_RECORDS_FLAG for h in headers)
    assert {h.codec for h in headers} == {{"none": 0, "snappy": 2, "zstd": 4}[compression]}
    columns = [decode_columns(data[p:p + h.size_bytes]) for p, h in iter_batches(data)]
    assert [v for c in columns for v in c.values] == [v for _, v, _ in sent]
    assert [h for c in columns for h in c.headers][3] == (("h", b"x3"), ("n", b""))
    assert json_records(http, topic)[:2] == [
        (i, f"k{i}", f"value-{i}", [{"name": "h", "value": f"x{i}"}, {"name": "n", "value": ""}]) for i in (0, 1)]
    got = consume(node, topic, 30)
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == \
        [(i, k, v, [("h", b"x%d" % i), ("n", None)]) for i, (k, v, _) in enumerate(sent)]


def test_an_encrypted_topic_seals_kafka_batches_and_still_serves_them(node, http):
    http.json("POST", "/v1/topics", 201, body={"name": "native-sealed"})  # a key ring: encrypted by default
    produce(node, "native-sealed", [(None, MARK + b"-%d" % i, []) for i in range(10)])
    files = glob.glob(os.path.join(node.data_dir, "native-sealed-0", "*.log"))
    assert files and not any(MARK in Path(f).read_bytes() for f in files)
    assert [m.value() for m in consume(node, "native-sealed", 10)] == [MARK + b"-%d" % i for i in range(10)]
    assert [r[2] for r in json_records(http, "native-sealed")] == [(MARK + b"-%d" % i).decode() for i in range(10)]


def test_both_record_formats_share_a_partition_in_offset_order(node, http):
    http.json("POST", "/v1/topics", 201, body={"name": "native-mixed", "config": {"encryption": "off"}})

    def over_http(values: list[str]) -> None:
        http.json("POST", "/v1/topics/native-mixed/records?acks=1",
                  body={"records": [{"value": v, "partition": 0} for v in values]})

    over_http(["h0", "h1"])
    produce(node, "native-mixed", [(None, b"k2", []), (None, b"k3", [])])
    over_http(["h4"])
    formats = [bool(h.attributes & KAFKA_RECORDS_FLAG) for _, h in iter_batches(raw_batches(node, "native-mixed"))]
    assert formats == [False, True, False]
    expected = ["h0", "h1", "k2", "k3", "h4"]
    assert [r[2] for r in json_records(http, "native-mixed")] == expected
    assert [m.value().decode() for m in consume(node, "native-mixed", 5)] == expected
