"""Publish's records take exactly the HTTP produce body's rules (the same records, the same
refusals), and Subscribe's messages carry what was fetched."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpc_api.convert import incoming_records, record_messages
from grpc_api.stubs import load
from logbroker.errors import InvalidRequestError
from logbroker.records import RECORDS_PER_REQUEST_MAX, TIMESTAMP_MAX, parse_body
from segments.batch import Record

pb, _ = load()

header_names = st.text(min_size=1, max_size=12).filter(lambda name: not name.lower().startswith("x-logbroker-"))
records = st.builds(
    lambda key, value, headers, partition, timestamp: pb.Record(
        key=key, value=value, headers=headers, timestamp_ms=timestamp,
        **({} if partition is None else {"partition": partition})),
    st.binary(max_size=16), st.binary(max_size=32), st.dictionaries(header_names, st.binary(max_size=8), max_size=3),
    st.none() | st.integers(0, 2**31 - 1), st.integers(0, TIMESTAMP_MAX))


def _as_body(record) -> dict:
    body: dict = {"value": record.value, "headers": [[k, v] for k, v in record.headers.items()]}
    if record.key:
        body["key"] = record.key
    if record.HasField("partition"):
        body["partition"] = record.partition
    if record.timestamp_ms:
        body["timestamp"] = record.timestamp_ms
    return body


@given(st.lists(records, min_size=1, max_size=20))
def test_publish_records_are_what_the_same_http_body_gives(messages):
    assert incoming_records(messages) == parse_body({"records": [_as_body(m) for m in messages]}, binary=True)


def test_empty_key_is_no_key_zero_timestamp_is_now_and_partition_only_when_set():
    (plain,) = incoming_records([pb.Record(value=b"v")])
    assert (plain.record.key, plain.record.timestamp, plain.partition) == (None, None, None)
    (placed,) = incoming_records([pb.Record(value=b"v", key=b"k", partition=0, timestamp_ms=5)])
    assert (placed.record.key, placed.record.timestamp, placed.partition) == (b"k", 5, 0)


@pytest.mark.parametrize(("messages", "message"), [
    ([], "must not be empty"),
    ([pb.Record(value=b"x")] * (RECORDS_PER_REQUEST_MAX + 1), "at most"),
    ([pb.Record(value=b"x", headers={"X-LogBroker-Origin": b"1"})], "broker's own"),
    ([pb.Record(value=b"x"), pb.Record(value=b"x", timestamp_ms=TIMESTAMP_MAX + 1)], "records[1].timestamp_ms"),
    ([pb.Record(value=b"x", partition=-1)], "non-negative"),
])
def test_bad_records_are_refused_by_name(messages, message):
    with pytest.raises(InvalidRequestError, match=message.replace("[", r"\[")):
        incoming_records(messages)


def test_fetched_records_become_messages_with_empty_bytes_for_none():
    fetched = [Record(7, 1_000, None, b"v", []), Record(8, 1_001, b"k", None, [("h", b"1"), ("g", b"")])]
    first, second = record_messages(pb.Record, "orders", 3, fetched)
    assert (first.topic, first.partition, first.offset, first.timestamp_ms, first.key, first.value,
            dict(first.headers)) == ("orders", 3, 7, 1_000, b"", b"v", {})
    assert (second.offset, second.key, second.value, dict(second.headers)) == (8, b"k", b"", {"h": b"1", "g": b""})
