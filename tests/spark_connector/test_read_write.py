"""Batch reads (segments and HTTP) and the sink, with a real SparkSession and a real node."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest

from spark_connector.http import HttpClient
from tests.spark_connector.conftest import aged_topic, collected_rows, create_topic, produce, wait_for_checkpoint
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS
from tests.support.nodes import NodeProcess

TOPIC = "orders"
PARTITIONS = 4
RECORDS = 120
MODES = ("path", "url")


def _record(i: int) -> dict[str, Any]:
    record: dict[str, Any] = {"value": f"value-{i}", "timestamp": 1_700_000_000_000 + i, "partition": i % PARTITIONS}
    if i % 2 == 0:
        record["key"] = f"key-{i}"
    if i % 3 == 0:
        record["headers"] = [["trace", f"t{i}"], ["n", str(i)]]
    return record


@pytest.fixture(scope="module")
def produced(node: Any) -> dict[tuple[int, int], tuple[Any, ...]]:
    """The topic's records as the node acknowledged them: {(partition, offset): expected row}."""
    create_topic(node, TOPIC, PARTITIONS)
    expected = {}
    for first in range(0, RECORDS, 40):  # three requests: three batches per partition
        records = [_record(i) for i in range(first, first + 40)]
        for record, ack in zip(records, produce(node, TOPIC, records), strict=True):
            assert ack["partition"] == record["partition"]
            expected[(ack["partition"], ack["offset"])] = _expected_row(record, ack["offset"])
    wait_for_checkpoint(node, TOPIC)
    return expected


def _expected_row(record: dict[str, Any], offset: int) -> tuple[Any, ...]:
    key = record["key"].encode() if "key" in record else None
    headers = {n: v.encode() for n, v in record.get("headers", [])}
    stamp = datetime.datetime.fromtimestamp(record["timestamp"] / 1000, tz=datetime.UTC).replace(tzinfo=None)
    return (key, record["value"].encode(), TOPIC, record["partition"], offset, stamp, headers)


def _reader(spark: Any, node: Any, mode: str, **options: str) -> Any:
    reader = spark.read.format("logbroker").option("topic", options.pop("topic", TOPIC))
    reader = reader.option(mode, node.data_dir if mode == "path" else node.url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@pytest.mark.parametrize("mode", MODES)
def test_batch_read_returns_exactly_the_produced_records(spark, node, produced, mode):
    df = _reader(spark, node, mode)
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,headers:map<string,binary>>")
    assert collected_rows(df) == produced
    assert df.rdd.getNumPartitions() == PARTITIONS


@pytest.mark.parametrize("mode", MODES)
def test_offset_ranges_are_honoured(spark, node, produced, mode):
    starting = '{"orders": {"0": 5, "2": -2, "3": 29}}'
    ending = '{"orders": {"0": 10, "1": 3, "3": -1}}'
    rows = collected_rows(_reader(spark, node, mode, startingOffsets=starting, endingOffsets=ending))
    want = {k: v for k, v in produced.items()
            if (k[0] == 0 and 5 <= k[1] < 10) or (k[0] == 1 and k[1] < 3) or k[0] == 2 or (k[0] == 3 and k[1] >= 29)}
    assert rows == want


@pytest.mark.parametrize("mode", MODES)
def test_starting_timestamp_starts_at_the_first_batch_at_or_after_it(spark, node, produced, mode):
    # Records 80..119 went in the third request: one batch per partition, timestamps from +80.
    rows = collected_rows(_reader(spark, node, mode, startingTimestamp=str(1_700_000_000_000 + 80)))
    assert rows == {k: v for k, v in produced.items() if k[1] >= 20}


def test_min_partitions_splits_ranges_without_changing_the_rows(spark, node, produced):
    df = _reader(spark, node, "path", minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    assert collected_rows(df) == produced


def test_sink_round_trips_a_dataframe(spark, node, produced):
    create_topic(node, "orders-copy", PARTITIONS)
    source = _reader(spark, node, "url").select("key", "value", "headers", "partition", "timestamp")
    source.write.format("logbroker").option("topic", "orders-copy").option("url", node.url).mode("append").save()
    copied = _reader(spark, node, "url", topic="orders-copy")
    assert _without_topic(collected_rows(copied).values()) == _without_topic(produced.values())


def _without_topic(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((r[:2] + r[3:6] + (sorted(r[6].items()),) for r in rows), key=lambda r: (r[2], r[3]))


def test_sink_takes_strings_kafka_style_headers_and_spreads_unkeyed_rows(spark, node):
    create_topic(node, "strings", 2)
    df = spark.createDataFrame(
        [(None, f"v{i}", [("h", f"x{i}")]) for i in range(50)] + [("k", "keyed", [])],
        "key string, value string, headers array<struct<key:string,value:string>>").repartition(1)
    df.write.format("logbroker").option("topic", "strings").option("url", node.url).option("batchBytes", "1024") \
        .mode("append").save()
    rows = _reader(spark, node, "url", topic="strings").collect()
    assert sorted(r.value for r in rows) == sorted([f"v{i}".encode() for i in range(50)] + [b"keyed"])
    assert {r.partition for r in rows if r.key is None} == {0, 1}  # round-robin per batch of ~1 KiB
    assert all(r.headers == {"h": b"x" + r.value[1:]} for r in rows if r.key is None)


BAD_READS = [
    ({}, "say where the records are"),
    ({"topic": "", "url": "http://127.0.0.1:1"}, "the option topic is required"),
    ({"url": "NODE", "path": "DATA"}, "not both"),
    ({"url": "NODE", "startingOffsets": "yesterday"}, "startingOffsets must be earliest, latest or JSON"),
    ({"url": "NODE", "startingOffsets": '{"other": {"0": 1}}'}, "naming exactly the topic 'orders'"),
    ({"url": "NODE", "startingOffsets": '{"orders": {"9": 1}}'}, "partition(s) [9] that the topic does not have"),
    ({"url": "NODE", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
    ({"url": "NODE", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger is for streaming reads only"),
    ({"url": "NODE", "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
    ({"url": "NODE", "subscribe": "orders"}, "unknown option(s) for reading: subscribe"),
    ({"path": "DATA", "topic": "missing"}, "topic 'missing' has no partition directory"),
    ({"url": "NODE", "topic": "missing"}, "topic 'missing' does not exist"),
    ({"url": "NODE", "startingOffsets": '{"orders": {"0": 1000}}'}, "is after the ending offset"),
]


@pytest.mark.parametrize(("options", "message"), BAD_READS)
def test_bad_read_options_fail_with_a_clear_message(spark, node, produced, options, message):
    reader = spark.read.format("logbroker")
    options = {"topic": TOPIC, **options}
    for name, value in options.items():
        reader = reader.option(name, value.replace("NODE", node.url).replace("DATA", node.data_dir))
    with pytest.raises(Exception, match=_escaped(message)):
        reader.load().collect()


def test_bad_sink_input_fails_with_a_clear_message(spark, node, produced):
    df = spark.createDataFrame([(b"v", 1.5)], "value binary, score double")
    with pytest.raises(Exception, match=_escaped("drop or rename ['score']")):
        df.write.format("logbroker").option("topic", TOPIC).option("url", node.url).mode("append").save()
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match=_escaped("give url, not path")):
        df.write.format("logbroker").option("topic", TOPIC).option("path", node.data_dir).mode("append").save()
    with pytest.raises(Exception, match=_escaped("acks must be one of 0, 1, all")):
        df.write.format("logbroker").option("topic", TOPIC).option("url", node.url).option("acks", "2") \
            .mode("append").save()


def _escaped(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize("mode", MODES)
def test_fail_on_data_loss_decides_about_records_deleted_by_retention(spark, node, mode):
    topic = f"aging-{mode}"
    earliest, latest = aged_topic(node, topic)
    starting = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        _reader(spark, node, mode, topic=topic, startingOffsets=starting).collect()
    rows = _reader(spark, node, mode, topic=topic, startingOffsets=starting, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(earliest, latest))


@pytest.fixture(scope="module")
def auth_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("auth-node") / "data"), *AUTH_ARGS) as process:
        yield process


def test_http_reads_and_writes_authenticate_with_a_token_or_a_password(spark, auth_node):
    with HttpClient(auth_node.url, username=ADMIN, password=ADMIN_PASSWORD) as client:
        body = json.dumps({"name": "secured", "partitions": 2}).encode()
        client.request("POST", "/v1/topics", body=body, headers={"Content-Type": "application/json"})
        token = client.json("POST", "/v1/auth/token", body=json.dumps(
            {"username": ADMIN, "password": ADMIN_PASSWORD}).encode(),
            headers={"Content-Type": "application/json"})["access_token"]
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], "key string, value string")
    df.write.format("logbroker").option("topic", "secured").option("url", auth_node.url) \
        .option("username", ADMIN).option("password", ADMIN_PASSWORD).mode("append").save()
    reader = spark.read.format("logbroker").option("topic", "secured").option("url", auth_node.url)
    with_token = reader.option("token", token).load().collect()
    assert sorted(r.value for r in with_token) == sorted(f"v{i}".encode() for i in range(20))
    with_password = spark.read.format("logbroker").option("topic", "secured").option("url", auth_node.url) \
        .option("username", ADMIN).option("password", ADMIN_PASSWORD).load().collect()
    assert len(with_password) == 20
    with pytest.raises(Exception, match="401"):
        spark.read.format("logbroker").option("topic", "secured").option("url", auth_node.url).load().collect()
