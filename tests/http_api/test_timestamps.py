"""The timestamp window around the broker's clock (decision 0221), against a real node: a record
stamped more than ``timestamp_after_max_ms`` (default one hour) ahead, or more than
``timestamp_before_max_ms`` (default no bound) behind, is refused with 400 ``invalid_timestamp``
and nothing is stored, whether it came as JSON, msgpack, a prebuilt batch or a gRPC Publish."""

from __future__ import annotations

import asyncio

import grpc
import msgpack
import pytest

from grpc_api import stubs
from segments.batch import ProducerRecord, encode_batch, now_ms
from tests.http_api.test_bad_input import assert_problem
from tests.support.grpc_calls import publish

pb, pb_grpc = stubs.load()
BATCH = "application/vnd.logbroker.batch"
MSGPACK = "application/x-msgpack"
HOUR_MS = 3_600_000
FAR_FUTURE = 2**60
LOG_APPEND = 1 << 3


def latest(http, topic: str) -> int:
    return http.json("GET", f"/v1/topics/{topic}/partitions/0/offsets?at=latest")["offset"]


def log_append(batch: bytes) -> bytes:
    """``batch`` (uncompressed, from ``encode_batch``) marked with the log-append timestamp type."""
    import struct

    import xxhash

    out = bytearray(batch)
    struct.pack_into("<H", out, 25, struct.unpack_from("<H", out, 25)[0] | LOG_APPEND)
    struct.pack_into("<Q", out, 17, xxhash.xxh3_64_intdigest(bytes(out[25:])))
    return bytes(out)


def refused(reply) -> dict:
    problem = assert_problem(reply, 400)
    assert problem["code"] == "invalid_timestamp", problem
    return problem


def test_a_record_from_far_in_the_future_is_refused_by_every_produce(http, node):
    http.json("POST", "/v1/topics", 201, body={"name": "clocked"})
    late = now_ms() + HOUR_MS + 60_000
    for stamp in (FAR_FUTURE, late):
        problem = refused(http.call("POST", "/v1/topics/clocked/records", body={"records": [
            {"value": "now"}, {"value": "later", "timestamp": stamp}]}))
        assert "timestamp_after_max_ms" in problem["detail"] and problem["timestamp"] == stamp
        refused(http.call("POST", "/v1/topics/clocked/records", content_type=MSGPACK,
                          raw=msgpack.packb({"records": [{"value": b"later", "timestamp": stamp}]})))
        batch = encode_batch([ProducerRecord(b"now"), ProducerRecord(b"later", timestamp=stamp)])
        refused(http.call("POST", "/v1/topics/clocked/records?partition=0", raw=batch, content_type=BATCH))
        # The log-append type stamps every record with the header's max_timestamp: held to it too.
        refused(http.call("POST", "/v1/topics/clocked/records?partition=0", raw=log_append(batch),
                          content_type=BATCH))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            asyncio.run(publish(node.grpc_address, pb.PublishRequest(topic="clocked", records=[
                pb.Record(value=b"later", timestamp_ms=stamp)])))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert dict(caught.value.trailing_metadata())["x-logbroker-error-code"] == "invalid_timestamp"
    assert latest(http, "clocked") == 0
    soon, old = now_ms() + HOUR_MS // 2, 1_000  # within the hour; the past has no bound by default
    http.json("POST", "/v1/topics/clocked/records", body={"records": [{"value": "soon", "timestamp": soon},
                                                                      {"value": "old", "timestamp": old}]})
    assert http.call("POST", "/v1/topics/clocked/records?partition=0", content_type=BATCH,
                     raw=encode_batch([ProducerRecord(b"old", timestamp=old), ProducerRecord(b"now")])).status == 200
    fetched = http.json("GET", "/v1/topics/clocked/partitions/0/records?offset=0")["records"]
    assert [r["timestamp"] for r in fetched][:3] == [soon, old, old]


def test_a_topic_sets_its_own_window_and_minus_one_lifts_a_bound(http):
    http.json("POST", "/v1/topics", 201, body={"name": "recent", "config": {
        "timestamp_before_max_ms": 60_000, "timestamp_after_max_ms": -1}})
    problem = refused(http.call("POST", "/v1/topics/recent/records", body={"records": [
        {"value": "stale", "timestamp": now_ms() - 120_000}]}))
    assert "timestamp_before_max_ms" in problem["detail"]
    refused(http.call("POST", "/v1/topics/recent/records?partition=0", content_type=BATCH, raw=encode_batch([
        ProducerRecord(b"now"), ProducerRecord(b"stale", timestamp=now_ms() - 120_000)])))
    assert latest(http, "recent") == 0
    http.json("POST", "/v1/topics/recent/records", body={"records": [{"value": "future", "timestamp": FAR_FUTURE}]})
    assert latest(http, "recent") == 1


@pytest.mark.parametrize("value", [-2, "3600000", True, 1.5, 2**62 + 1])
@pytest.mark.parametrize("key", ["timestamp_after_max_ms", "timestamp_before_max_ms"])
def test_a_window_that_is_not_a_number_of_milliseconds_is_refused(http, key, value):
    problem = assert_problem(http.call("POST", "/v1/topics", body={"name": "badwindow", "config": {key: value}}), 400)
    assert problem["code"] == "invalid_topic" and key in problem["detail"]
    assert http.call("GET", "/v1/topics/badwindow").status == 404
