"""Resource bounds one user could break, through a real node: topic configs that would roll a
segment per produce are refused (and stored ones are clamped), and a compressed batch of a million
records or of 40 MiB of zeros is refused at produce with a typed 413, into a topic and into a
queue, while the node keeps answering. Batches at the bounds are accepted and read back a record
at a time."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client as httpclient
import json
import struct
import time
import urllib.parse

import msgpack
import pytest
import xxhash
import zstandard

from coordinator.models import TOPIC_CONFIG_BOUNDS
from logbroker.config import NodeConfig
from logbroker.node import Node
from segments.batch import (
    BATCH_RECORDS_BYTES_MAX,
    BATCH_RECORDS_MAX,
    CHECKSUMMED_FROM,
    HEADER_SIZE,
    LENGTH_PREFIX_SIZE,
    encode_values,
)
from segments.compression import Codec
from tests.http_api.conftest import TIMEOUT_S, Http
from tests.http_api.test_bad_input import assert_problem, log_ends
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

BATCH = "application/vnd.logbroker.batch"
ANSWER_WITHIN_S = 5.0  # generous: the node answers small requests at once when it is not blocked
STORED_BOMB_RECORDS = 3_000_000  # decoding all of it took the node past 600 MB
RSS_BYTES_MAX = 400 * 1024 * 1024


def empty_records_batch(count: int) -> bytes:
    """A zstd batch of ``count`` empty records, built from the format (the records section packed
    directly: millions of records in seconds)."""
    packer = msgpack.Packer(use_bin_type=True)
    section = packer.pack_array_header(count) + b"".join(packer.pack([i, 0, None, b"", []]) for i in range(count))
    template = bytearray(encode_values([b""], timestamp_ms=0, codec=Codec.ZSTD))
    return _with_section(template, zstandard.ZstdCompressor(level=19).compress(section), count)


def _with_section(template: bytearray, section: bytes, count: int) -> bytes:
    batch = template[:HEADER_SIZE] + section
    struct.pack_into("<I", batch, 8, len(batch) - LENGTH_PREFIX_SIZE)
    struct.pack_into("<I", batch, 27, count - 1)
    struct.pack_into("<I", batch, 61, count)
    struct.pack_into("<Q", batch, 17, xxhash.xxh3_64_intdigest(bytes(batch[CHECKSUMMED_FROM:])))
    return bytes(batch)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    batch = empty_records_batch(1_000_000)  # 10x the record bound; 11 MB decompressed
    assert len(batch) < 1 << 20, "fits the test node's request body limit"
    return batch


@pytest.fixture(scope="module")
def topic(http):
    http.json("POST", "/v1/topics", 201, body={"name": "bombed", "partitions": 2})
    return "bombed"


@pytest.fixture(scope="module")
def queue(http):
    http.json("POST", "/v1/topics", 201, body={"name": "bombed-q", "kind": "queue"})
    return "bombed-q"


def answers_promptly(http: Http) -> None:
    started = time.monotonic()
    assert http.call("GET", "/healthz").status == 200
    assert time.monotonic() - started < ANSWER_WITHIN_S


# ---- topic config bounds ---------------------------------------------------------------------

OUT_OF_BOUNDS = [("segment_bytes", 65)] + [(key, value) for key, (low, high) in sorted(TOPIC_CONFIG_BOUNDS.items())
                                           for value in (low - 1, high + 1)]


@pytest.mark.parametrize(("key", "value"), OUT_OF_BOUNDS)
def test_a_topic_config_past_its_bounds_is_refused_and_creates_nothing(http, key, value):
    name = f"cfg-{key.replace('_', '-')}-{value}"[:60]
    problem = assert_problem(http.call("POST", "/v1/topics", body={"name": name, "config": {key: value}}), 400)
    low, high = TOPIC_CONFIG_BOUNDS[key]
    assert problem["code"] == "invalid_topic" and problem["field"] == f"config.{key}"
    assert (problem["minimum"], problem["maximum"]) == (low, high)
    assert name not in [t["name"] for t in http.json("GET", "/v1/topics")["topics"]]


def test_a_queue_config_is_held_to_the_same_bounds(http):
    problem = assert_problem(http.call("POST", "/v1/topics", body={
        "name": "tiny-q", "kind": "queue", "config": {"segment_ms": 1}}), 400)
    assert problem["field"] == "config.segment_ms"
    names = [t["name"] for t in http.json("GET", "/v1/topics")["topics"]]
    assert "tiny-q" not in names and "tiny-q.dlq" not in names


def test_a_topic_stored_past_the_bounds_opens_with_its_config_clamped(tmp_path):
    data = str(tmp_path / "data")
    with NodeProcess(data, *SMALL_SEGMENTS) as first:
        http = Http(first.url)
        http.json("POST", "/v1/topics", 201, body={"name": "old", "config": {"segment_bytes": 4096}})
        http.json("POST", "/v1/topics/old/records", body={"records": [{"value": "v" * 500} for _ in range(40)]})
        assert http.json("GET", "/v1/topics/old")["config"]["segment_bytes"] == 4096
    with NodeProcess(data) as second:
        http = Http(second.url)
        described = http.json("GET", "/v1/topics/old")
        assert described["config"]["segment_bytes"] == TOPIC_CONFIG_BOUNDS["segment_bytes"][0]
        assert described["partitions"][0]["log_end_offset"] == 40
        http.json("POST", "/v1/topics/old/records", body={"records": [{"value": "after"}]})
        fetched = http.json("GET", "/v1/topics/old/partitions/0/records?offset=0")
        assert [r["value"] for r in fetched["records"]] == ["v" * 500] * 40 + ["after"]


# ---- batch bombs -------------------------------------------------------------------------------

def test_a_compressed_batch_of_a_million_records_is_refused_and_the_node_answers(http, topic, bomb):
    before = log_ends(http, topic)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        sent = pool.submit(http.call, "POST", f"/v1/topics/{topic}/records?partition=0", raw=bomb,
                           content_type=BATCH)
        answers_promptly(http)
        reply = sent.result(timeout=TIMEOUT_S)
    problem = assert_problem(reply, 413)
    assert problem["code"] == "batch_too_large" and str(BATCH_RECORDS_MAX) in problem["detail"]
    assert log_ends(http, topic) == before
    answers_promptly(http)
    offsets = http.json("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": "ok", "partition": 0}]})
    assert offsets["offsets"] == [{"partition": 0, "offset": before[0]}]


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_a_batch_that_decompresses_past_the_bound_is_refused(http, topic, codec):
    before = log_ends(http, topic)
    bomb = encode_values([bytes(BATCH_RECORDS_BYTES_MAX + (1 << 20))], codec=codec)
    problem = assert_problem(http.call("POST", f"/v1/topics/{topic}/records?partition=1", raw=bomb,
                                       content_type=BATCH), 413)
    assert problem["code"] == "batch_too_large" and str(BATCH_RECORDS_BYTES_MAX) in problem["detail"]
    assert log_ends(http, topic) == before


def test_a_bomb_sent_into_a_queue_is_refused_and_the_queue_goes_on(http, queue, bomb):
    before = log_ends(http, queue)
    problem = assert_problem(http.call("POST", f"/v1/topics/{queue}/records?partition=0", raw=bomb,
                                       content_type=BATCH), 413)
    assert problem["code"] == "batch_too_large"
    assert log_ends(http, queue) == before
    http.json("POST", f"/v1/queues/{queue}/messages", body={"records": [{"value": "job"}]})
    messages = http.json("POST", f"/v1/queues/{queue}/receive", body={"max_messages": 10, "wait_ms": 2000})["messages"]
    assert [m["value"] for m in messages] == ["job"]


def test_a_batch_at_the_bounds_is_accepted_and_read_a_record_at_a_time(http, topic):
    full = encode_values([bytes(300)] * BATCH_RECORDS_MAX, timestamp_ms=1, codec=Codec.ZSTD)  # 30 MB decompressed
    assert len(full) < 1 << 20
    base = http.json("POST", f"/v1/topics/{topic}/records?partition=1", raw=full,
                     content_type=BATCH)["offsets"][0]["offset"]
    one = http.json("GET", f"/v1/topics/{topic}/partitions/1/records?offset={base + 70_000}&max_records=1")
    assert [(r["offset"], r["value"]) for r in one["records"]] == [(base + 70_000, "\0" * 300)]
    assert one["next_offset"] == base + 70_001
    answers_promptly(http)


def test_the_node_answers_while_it_renders_a_hundred_thousand_records(http):
    http.json("POST", "/v1/topics", 201, body={"name": "wide"})
    batch = empty_records_batch(BATCH_RECORDS_MAX)
    http.json("POST", "/v1/topics/wide/records?partition=0", raw=batch, content_type=BATCH)
    query = urllib.parse.urlencode({"offset": 0, "max_records": BATCH_RECORDS_MAX, "max_bytes": 16 << 20})
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        fetching = pool.submit(http.call, "GET", f"/v1/topics/wide/partitions/0/records?{query}")
        answers_promptly(http)
        reply = fetching.result(timeout=TIMEOUT_S)
    assert reply.status == 200
    records = json.loads(reply.data)["records"]
    assert len(records) == BATCH_RECORDS_MAX and records[-1]["offset"] == BATCH_RECORDS_MAX - 1


def test_a_push_stream_of_a_full_batch_starts_with_its_first_record(http):
    http.json("POST", "/v1/topics", 201, body={"name": "pushed"})
    http.json("POST", "/v1/topics/pushed/records?partition=0", raw=empty_records_batch(BATCH_RECORDS_MAX),
              content_type=BATCH)
    connection = httpclient.HTTPConnection(http.host, http.port, timeout=TIMEOUT_S)
    try:
        connection.request("GET", "/v1/topics/pushed/partitions/0/stream?offset=0")
        response = connection.getresponse()
        assert response.status == 200
        head = response.read1(4096).decode()
    finally:
        connection.close()
    assert head.startswith('id: 0\nevent: record\ndata: {"offset":0,')
    answers_promptly(http)


def test_a_bomb_stored_before_the_bounds_is_read_a_record_at_a_time(tmp_path):
    """A node stored the batch before produce checked it (written here below the HTTP layer); a
    JSON fetch of one record, a push stream and the node's memory stay small."""
    data = str(tmp_path / "data")
    asyncio.run(_store_unchecked(data, "legacy", empty_records_batch(STORED_BOMB_RECORDS)))
    with NodeProcess(data) as process:
        http = Http(process.url)
        one = http.json("GET", f"/v1/topics/legacy/partitions/0/records?offset={STORED_BOMB_RECORDS - 2}"
                               "&max_records=1")
        assert [r["offset"] for r in one["records"]] == [STORED_BOMB_RECORDS - 2]
        assert one["next_offset"] == STORED_BOMB_RECORDS - 1 and one["high_watermark"] == STORED_BOMB_RECORDS
        answers_promptly(http)
        assert peak_rss_bytes(process.pid) < RSS_BYTES_MAX


async def _store_unchecked(data_dir: str, topic: str, batch: bytes) -> None:
    node = Node(NodeConfig(data_dir=data_dir, auth="off", rpc_port=0))
    await node.start()
    try:
        await node.topics.create_topic({"name": topic})
        await node.writes.produce_batch(topic, 0, batch, "1")
    finally:
        await node.stop()


def peak_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")
