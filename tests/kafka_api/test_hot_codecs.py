"""The hand-written Produce and Fetch responses are the bytes kio's classes write, for every
served version (``kafka_api.hot_codecs``), and ordinary answers take the hand-written path."""

from __future__ import annotations

import array
import datetime
import struct
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kafka_api import entities, hot_codecs, wire
from kafka_api.apis import BY_KEY

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
CODES = st.sampled_from([int(code) for code in ErrorCode])
NAMES = st.text(max_size=20)
RECORDS = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=127, max_size=300))
WHEN = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)


def versions(key: int) -> range:
    api = BY_KEY[key]
    return range(api.min_version, api.max_version + 1)


produce_partitions = st.fixed_dictionaries({
    "index": I32, "error_code": CODES, "base_offset": I64,
    "log_append_time": st.one_of(st.none(), st.none(), st.just(WHEN)),
    "log_start_offset": I64,
    "record_errors": st.one_of(st.just([]), st.just([]), st.just([{"batch_index": 0,
                                                                    "batch_index_error_message": "bad"}])),
    "error_message": st.one_of(st.none(), NAMES)})
produce_values = st.fixed_dictionaries({
    "responses": st.lists(st.fixed_dictionaries({"name": NAMES,
                                                 "partition_responses": st.lists(produce_partitions, max_size=3)}),
                          max_size=3),
    "throttle_time": st.integers(0, 2**31 - 1)})

fetch_partitions = st.fixed_dictionaries({
    "partition_index": I32, "error_code": CODES, "high_watermark": I64, "last_stable_offset": I64,
    "log_start_offset": I64,
    "aborted_transactions": st.one_of(st.none(), st.just([]), st.just([{"producer_id": 7, "first_offset": 3}])),
    "preferred_read_replica": I32, "records": RECORDS},
    optional={"current_leader": st.fixed_dictionaries({"leader_id": I32, "leader_epoch": I32})})
fetch_values = st.fixed_dictionaries({
    "throttle_time": st.integers(0, 2**31 - 1), "error_code": CODES, "session_id": I32,
    "responses": st.lists(st.fixed_dictionaries({"topic": NAMES, "topic_id": st.uuids(),
                                                 "partitions": st.lists(fetch_partitions, max_size=3)}),
                          max_size=3),
    "node_endpoints": st.one_of(st.just([]), st.just([{"node_id": 2, "host": "h", "port": 9093, "rack": None}]))})


def general(key: int, version: int, values: dict[str, Any]) -> bytes:
    return entities.encode(entities.build(entities.response_class(key, version), values))


def partitions(values: dict[str, Any], field: str) -> list[dict[str, Any]]:
    return [p for topic in values["responses"] for p in topic[field]]


def assert_written_as_kio_writes(key: int, values: dict[str, Any], *, ordinary: bool) -> None:
    """For every served version: the hand-written body, when written, is kio's; an ``ordinary``
    answer is always written by hand."""
    for version in versions(key):
        parts = hot_codecs.encode_response(key, version, values)
        if ordinary:
            assert parts is not None, f"v{version}: an ordinary answer left to the general path"
        if parts is not None:
            assert b"".join(parts) == general(key, version, values), f"v{version}"


@settings(max_examples=300)
@given(produce_values)
def test_a_produce_response_is_the_bytes_kio_writes(values):
    ordinary = not any(p["log_append_time"] or p["record_errors"] for p in partitions(values, "partition_responses"))
    assert_written_as_kio_writes(hot_codecs.PRODUCE_KEY, values, ordinary=ordinary)


@settings(max_examples=300)
@given(fetch_values)
def test_a_fetch_response_is_the_bytes_kio_writes(values):
    ordinary = not values["node_endpoints"] and not any(
        p["aborted_transactions"] or "current_leader" in p for p in partitions(values, "partitions"))
    assert_written_as_kio_writes(hot_codecs.FETCH_KEY, values, ordinary=ordinary)


def test_what_it_does_not_take_goes_to_the_general_path():
    fetch = {"throttle_time": 0, "error_code": 0, "session_id": 0, "node_endpoints": [],
             "responses": [{"topic": "t", "topic_id": uuid.UUID(int=1), "partitions": [
                 {"partition_index": 0, "error_code": 6, "high_watermark": -1, "last_stable_offset": -1,
                  "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
                  "records": b"", "current_leader": {"leader_id": 2, "leader_epoch": 4}}]}]}
    assert hot_codecs.encode_response(hot_codecs.FETCH_KEY, 12, fetch) is None, "a leader hint is a tagged field"
    assert hot_codecs.encode_response(hot_codecs.FETCH_KEY, 11, fetch) is not None, "v11 has no tagged fields"
    del fetch["responses"][0]["partitions"][0]["high_watermark"]
    assert hot_codecs.encode_response(hot_codecs.FETCH_KEY, 11, fetch) is None, "a missing field"
    assert hot_codecs.encode_response(3, 12, {"brokers": []}) is None, "Metadata is not written by hand"


def test_records_as_a_memoryview_of_wider_items_are_framed_by_their_bytes():
    records = memoryview(array.array("i", [1, 2, 3]))  # 3 items, 12 bytes
    values = {"throttle_time": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1, "log_start_offset": -1,
         "aborted_transactions": None, "preferred_read_replica": -1, "records": records}]}]}
    parts = hot_codecs.encode_response(hot_codecs.FETCH_KEY, 4, values)
    assert parts is not None
    frame = wire.response_frame(5, parts, flexible_header=False)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert frame.endswith(struct.pack(">i", 12) + records.tobytes())


def test_an_error_code_kafka_does_not_name_is_left_to_the_general_path():
    produce = {"throttle_time": 0, "responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 9999, "base_offset": -1, "log_append_time": None, "log_start_offset": -1,
         "record_errors": [], "error_message": None}]}]}
    assert hot_codecs.encode_response(hot_codecs.PRODUCE_KEY, 9, produce) is None
