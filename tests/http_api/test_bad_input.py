"""Bad input through real HTTP: every case gets its documented status as problem+json and
writes nothing (the partitions' log end offsets do not move)."""

from __future__ import annotations

import json

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments.batch import ProducerRecord, encode_batch

BATCH = "application/vnd.logbroker.batch"
PARTITIONS = 2


@pytest.fixture(scope="module")
def topic(http):
    http.json("POST", "/v1/topics", 201, body={"name": "bad", "partitions": PARTITIONS})
    http.json("POST", "/v1/topics/bad/records", body={"records": [{"value": "seed", "partition": 0}]})
    return "bad"


def log_ends(http, topic):
    return [p["log_end_offset"] for p in http.json("GET", f"/v1/topics/{topic}")["partitions"]]


def assert_problem(reply, status):
    assert reply.status == status, (reply.status, reply.data[:300])
    assert reply.headers["content-type"].startswith("application/problem+json")
    problem = reply.json()
    assert problem["status"] == status and isinstance(problem["detail"], str)
    return problem


@pytest.mark.parametrize(("raw", "content_type", "status"), [
    (b"{not json", "application/json", 400),
    (b'{"records": "x"}', "application/json", 400),
    (b'{"records": []}', "application/json", 400),
    (b'{"records": [{"value": 5}]}', "application/json", 400),
    (b'{"records": [{"value": "a", "value_b64": "YQ=="}]}', "application/json", 400),
    (b'{"records": [{"value_b64": "!!"}]}', "application/json", 400),
    (b'{"records": [{"value": "a", "partition": -1}]}', "application/json", 400),
    (b'{"records": [{"value": "a", "partition": 99}]}', "application/json", 400),
    (b'{"records": [{"value": "a", "timestamp": "now"}]}', "application/json", 400),
    (b'{"records": [{"value": "a", "headers": [[1, "x"]]}]}', "application/json", 400),
    (b'{"records": [{"value": "a", "colour": "red"}]}', "application/json", 400),
    (b"\xc1\xc1\xc1", "application/x-msgpack", 400),
    (msgpack.packb([1, 2]), "application/x-msgpack", 400),
    (b"value=1", "application/x-www-form-urlencoded", 415),
    (b"hello", "text/plain", 415),
])
def test_malformed_produce_bodies(http, topic, raw, content_type, status):
    before = log_ends(http, topic)
    assert_problem(http.call("POST", f"/v1/topics/{topic}/records", raw=raw, content_type=content_type), status)
    assert log_ends(http, topic) == before


def test_prebuilt_batch_with_bad_checksum_or_shape(http, topic):
    before = log_ends(http, topic)
    batch = bytearray(encode_batch([ProducerRecord(b"x" * 50) for _ in range(10)]))
    batch[-3] ^= 0x40
    assert_problem(http.call("POST", f"/v1/topics/{topic}/records?partition=0", raw=bytes(batch),
                             content_type=BATCH), 400)
    good = encode_batch([ProducerRecord(b"y")])
    for query, raw, status in [("?partition=0", good[:-1], 400), ("?partition=0", good + b"\0", 400),
                               ("", good, 400), ("?partition=7", good, 404)]:
        assert_problem(http.call("POST", f"/v1/topics/{topic}/records{query}", raw=raw, content_type=BATCH), status)
    assert log_ends(http, topic) == before


def test_body_over_the_limit_is_413(http, topic):
    before = log_ends(http, topic)
    big = json.dumps({"records": [{"value": "x" * (1 << 20)}]}).encode()
    assert_problem(http.call("POST", f"/v1/topics/{topic}/records", raw=big, content_type="application/json"), 413)
    assert log_ends(http, topic) == before


@pytest.mark.parametrize(("path", "status"), [
    ("/v1/topics/nope/partitions/0/records?offset=0", 404),
    ("/v1/topics/bad/partitions/9/records?offset=0", 404),
    ("/v1/topics/bad/partitions/-1/records?offset=0", 400),
    ("/v1/topics/bad/partitions/x/records?offset=0", 400),
    ("/v1/topics/bad/partitions/0/records", 400),
    ("/v1/topics/bad/partitions/0/records?offset=-1", 400),
    ("/v1/topics/bad/partitions/0/records?offset=1.5", 400),
    ("/v1/topics/bad/partitions/0/records?offset=abc", 400),
    ("/v1/topics/bad/partitions/0/records?offset=0&max_bytes=0", 400),
    ("/v1/topics/bad/partitions/0/records?offset=0&max_records=0", 400),
    ("/v1/topics/bad/partitions/0/records?offset=0&encoding=rot13", 400),
    ("/v1/topics/bad/partitions/0/offsets?at=tomorrow", 400),
    ("/v1/topics/a%2F..%2Fb/partitions/0/records?offset=0", 400),
    ("/v1/topics/..%2F..%2Fetc/partitions/0/records?offset=0", 400),
])
def test_bad_fetch_requests(http, topic, path, status):
    assert_problem(http.call("GET", path), status)


def test_offset_out_of_range_says_earliest_and_latest(http, topic):
    problem = assert_problem(http.call("GET", f"/v1/topics/{topic}/partitions/0/records?offset=999"), 416)
    assert problem["earliest"] == 0 and problem["latest"] == log_ends(http, topic)[0]


def test_unknown_topic_produce_is_404_and_creates_nothing(http):
    assert_problem(http.call("POST", "/v1/topics/ghost/records", body={"records": [{"value": "x"}]}), 404)
    assert "ghost" not in [t["name"] for t in http.json("GET", "/v1/topics")["topics"]]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)
record_like = st.fixed_dictionaries({}, optional={
    "key": json_values, "value": json_values, "value_b64": json_values, "headers": json_values,
    "partition": json_values, "timestamp": json_values})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(json_values, st.fixed_dictionaries({"records": st.lists(record_like, max_size=4)})))
def test_arbitrary_json_never_breaks_the_handler(http, topic, body):
    before = log_ends(http, topic)
    reply = http.call("POST", f"/v1/topics/{topic}/records", raw=json.dumps(body).encode(),
                      content_type="application/json")
    assert reply.status in (200, 400), (reply.status, reply.data[:300])
    if reply.status == 400:
        assert log_ends(http, topic) == before
    else:
        written = sum(after - b for after, b in zip(log_ends(http, topic), before, strict=True))
        assert written == len(body["records"])


def test_a_request_too_large_for_one_partition_writes_no_partition(http):
    http.json("POST", "/v1/topics", 201, body={"name": "split", "partitions": 2, "config": {"max_batch_bytes": 2000}})
    before = log_ends(http, "split")
    records = [{"value": "a" * 100, "partition": 0}] + [{"value": "b" * 100, "partition": 1} for _ in range(40)]
    problem = assert_problem(http.call("POST", "/v1/topics/split/records", body={"records": records}), 413)
    assert problem["code"] == "batch_too_large"
    assert log_ends(http, "split") == before


def test_a_prebuilt_batch_whose_records_cannot_be_decoded_is_refused_and_changes_nothing(http):
    """Decision 0220: every record row is checked at produce, as readers will decode it."""
    import struct

    import xxhash

    from segments.batch import CHECKSUMMED_FROM, HEADER_SIZE

    def with_records_section(section: bytes) -> bytes:
        batch = bytearray(encode_batch([ProducerRecord(b"x"), ProducerRecord(b"y")]))
        batch[HEADER_SIZE:] = section
        struct.pack_into("<I", batch, 8, len(batch) - 12)
        struct.pack_into("<Q", batch, 17, xxhash.xxh3_64_intdigest(bytes(batch[CHECKSUMMED_FROM:])))
        return bytes(batch)

    http.json("POST", "/v1/topics", 201, body={"name": "poison"})
    http.json("POST", "/v1/topics/poison/records", body={"records": [{"value": "good"}]})
    for section in (b"\xc1" * 20,  # 0xc1 is never valid msgpack
                    b"\x92" + b"\xc1" * 20,  # an array of two whose rows are not msgpack
                    msgpack.packb([[0, 0, 7, b"x", []], [1, 0, None, b"y", []]]),  # an integer key
                    msgpack.packb([[0, 0, None, b"x", []], [0, 0, None, b"y", []]]),  # offset deltas 0, 0
                    msgpack.packb([[0, 0, None, b"x", []], [1, 0, None, b"y", [["h", 1]]]]),  # a header's value
                    msgpack.packb([[0, 0, None, b"x", []], [1, 0, None, b"y"]]),  # four fields
                    msgpack.packb([[0, 0, None, b"x", []], [1, 0, None, b"y", []]])[:-3]):  # truncated
        problem = assert_problem(http.call("POST", "/v1/topics/poison/records?partition=0",
                                           raw=with_records_section(section), content_type=BATCH), 400)
        assert problem["code"] == "invalid_batch", section
    good = http.json("GET", "/v1/topics/poison/partitions/0/records?offset=0")
    assert [r["value"] for r in good["records"]] == ["good"] and good["next_offset"] == 1
    assert good["skipped"] == []
