"""What produce lets in, against a real node: any bytes sent as a prebuilt batch are refused with
4xx and change nothing, or stored and readable by every reader (decision 0220); a header name
that case-folds to the broker's reserved prefix (a Kelvin sign for the ``k``) is refused by JSON,
msgpack, gRPC and prebuilt batches alike."""

from __future__ import annotations

import asyncio
import struct

import msgpack
import pytest
import xxhash
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from grpc_api import stubs
from logbroker.client.consumer_batch import decode_fetched
from segments.batch import HEADER_SIZE, LENGTH_PREFIX_SIZE, ProducerRecord, encode_batch, now_ms
from segments.compression import Codec, compress
from tests.http_api.test_bad_input import assert_problem
from tests.support.grpc_calls import publish

pb, pb_grpc = stubs.load()
BATCH = "application/vnd.logbroker.batch"
MSGPACK = "application/x-msgpack"
KELVIN = "x-logbro\u212aer-origin"  # K (U+212A) case-folds to k
LOG_APPEND = 1 << 3


@pytest.fixture(scope="module")
def topic(http) -> str:
    # No timestamp window: this file is about rows (the window has tests of its own).
    http.json("POST", "/v1/topics", 201, body={"name": "prebuilt", "config": {
        "timestamp_after_max_ms": -1, "timestamp_before_max_ms": -1}})
    return "prebuilt"


def latest(http, topic: str) -> int:
    return http.json("GET", f"/v1/topics/{topic}/partitions/0/offsets?at=latest")["offset"]


def forged(section: bytes, *, count: int, codec: int, attributes: int, first_ts: int, max_ts: int) -> bytes:
    """A batch around ``section`` (compressed with ``codec``) with the given header fields and a
    correct checksum."""
    packed = compress(Codec(codec), section)
    body = struct.pack("<HIqqqhiI", attributes | codec, (count - 1) % 2**32, first_ts, max_ts, -1, -1, -1, count)
    checksum = xxhash.xxh3_64_intdigest(body + packed)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(packed), 0)
    return prefix + b"\x01" + struct.pack("<Q", checksum) + body + packed


I64 = st.integers(-(2**63), 2**63 - 1)
FIELD = st.recursive(st.none() | st.booleans() | I64 | st.binary(max_size=8) | st.text(max_size=8) | st.floats(),
                     lambda inner: st.lists(inner, max_size=3), max_leaves=6)
HEADER_NAME = st.sampled_from(["h", "ok", "x-logbroker", "x-logbroker-q", KELVIN]) | st.text(max_size=6)
HEADER_PAIR = st.tuples(HEADER_NAME, st.binary(max_size=4)) | st.lists(FIELD, max_size=3)


@st.composite
def rows(draw: st.DrawFn) -> list:
    """Record rows, mostly well formed, each field sometimes replaced by anything msgpack holds."""
    count = draw(st.integers(1, 5))
    out = []
    for i in range(count):
        row: list = [i, draw(st.integers(-1000, 1000)), draw(st.none() | st.binary(max_size=6)),
                     draw(st.none() | st.binary(max_size=6)), []]
        if draw(st.integers(0, 3)) == 0:
            row[4] = draw(st.lists(HEADER_PAIR, min_size=1, max_size=2))
        if draw(st.integers(0, 15)) == 0:
            row[draw(st.integers(0, 4))] = draw(FIELD)
        if draw(st.integers(0, 30)) == 0:
            row = row[:draw(st.integers(0, 4))]
        out.append(row)
    return out


@st.composite
def prebuilt(draw: st.DrawFn) -> bytes:
    """A prebuilt batch as a client could send it: structured rows with a consistent header most of
    the time, any header fields or a mangled section (checksum made right again) some of the time,
    or raw bytes."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=200))
    table = draw(rows())
    now = now_ms()
    stamps = [now + r[1] if len(r) > 1 and type(r[1]) is int else now for r in table]
    section = msgpack.packb(table, use_bin_type=True)
    if draw(st.integers(0, 15)) == 0:
        cut = draw(st.integers(0, len(section)))
        section = section[:cut] + draw(st.binary(max_size=4)) + section[cut + draw(st.integers(0, 3)):]
    first_ts, max_ts = now, max(stamps)
    if draw(st.integers(0, 15)) == 0:
        first_ts, max_ts = draw(I64), draw(I64)
    count = len(table) + draw(st.sampled_from([0] * 14 + [1, -1]))
    return forged(section, count=max(count, 0), codec=draw(st.sampled_from(list(Codec))),
                  attributes=draw(st.sampled_from([0, 0, 0, LOG_APPEND])), first_ts=first_ts, max_ts=max_ts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=prebuilt())
@example(batch=forged(msgpack.packb([[0, 0, 1, b"v", []]]), count=1, codec=0, attributes=0, first_ts=0, max_ts=0))
@example(batch=forged(msgpack.packb([[0, 0, None, b"v", [[KELVIN, b"x"]]]]), count=1, codec=4, attributes=0,
                      first_ts=0, max_ts=0))
@example(batch=forged(msgpack.packb([[0, 2**62, None, b"v", []]]), count=1, codec=0, attributes=0, first_ts=2**62,
                      max_ts=2**63 - 1))
@example(batch=forged(bytes.fromhex("91950000c0c401769192a18fc40178"), count=1, codec=0, attributes=0, first_ts=0,
                      max_ts=0))  # a header name whose msgpack str is not UTF-8 (was a 500)
def test_a_prebuilt_batch_is_refused_and_changes_nothing_or_every_reader_reads_it(http, node, topic, batch):
    before = latest(http, topic)
    reply = http.call("POST", f"/v1/topics/{topic}/records?partition=0", raw=batch, content_type=BATCH)
    assert reply.status < 500, reply.data[:300]
    event(f"answered {reply.status}")
    if reply.status >= 400:
        assert_problem(reply, reply.status)
        assert latest(http, topic) == before
        return
    (stored,) = reply.json()["offsets"]
    count = latest(http, topic) - stored["offset"]
    assert count == struct.unpack_from("<I", batch, 61)[0]
    base = stored["offset"]
    whole = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset={base}&max_records={count}")
    assert [r["offset"] for r in whole["records"]] == list(range(base, base + count)) and whole["skipped"] == []
    # One record at a time decodes as the push streams and gRPC do (only as far as asked).
    for offset in range(base, base + count):
        one = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset={offset}&max_records=1"
                               "&encoding=base64")
        assert [r["offset"] for r in one["records"]] == [offset] and one["skipped"] == []
        assert -(2**63) <= one["records"][0]["timestamp"] < 2**63  # an int64 for gRPC's Record
    raw = http.call("GET", f"/v1/topics/{topic}/partitions/0/records?offset={base}&max_bytes=1",
                    headers={"Accept": BATCH})
    consumed = decode_fetched(raw.data, topic, 0, base)  # the Python consumers' decoder
    assert list(consumed.offsets) == list(range(base, base + count)) and consumed.skipped == ()


def test_a_reserved_header_name_with_a_kelvin_sign_is_refused_by_every_produce(http, node, topic):
    before = latest(http, topic)
    json_body = {"records": [{"value": "v", "headers": [[KELVIN, "forged"]]}]}
    assert assert_problem(http.call("POST", f"/v1/topics/{topic}/records", body=json_body), 400)["code"] \
        == "invalid_request"
    packed = msgpack.packb({"records": [{"value": b"v", "headers": [[KELVIN, b"forged"]]}]})
    assert_problem(http.call("POST", f"/v1/topics/{topic}/records", raw=packed, content_type=MSGPACK), 400)
    for codec in Codec:
        batch = encode_batch([ProducerRecord(b"v", None, [("ok", b"1"), (KELVIN, b"forged")])], codec=codec)
        problem = assert_problem(http.call("POST", f"/v1/topics/{topic}/records?partition=0", raw=batch,
                                           content_type=BATCH), 400)
        assert problem["code"] == "invalid_batch" and "broker's own" in problem["detail"]
    import grpc

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(publish(node.grpc_address, pb.PublishRequest(topic=topic, records=[
            pb.Record(value=b"v", headers={KELVIN: b"forged"})])))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert latest(http, topic) == before
    fine = encode_batch([ProducerRecord(b"v", None, [("x-logbroker", b"1"), ("my-x-logbroker-q", b"2")])])
    assert http.call("POST", f"/v1/topics/{topic}/records?partition=0", raw=fine, content_type=BATCH).status == 200
