"""Produce and fetch through real HTTP: JSON, msgpack, prebuilt batches, raw (sendfile) fetch,
partitioning, headers, offsets by time."""

from __future__ import annotations

import base64

import msgpack
import pytest

from segments.batch import ProducerRecord, decode_records, encode_batch, iter_batches

BATCH = "application/vnd.logbroker.batch"


@pytest.fixture(scope="module")
def topic(http):
    http.json("POST", "/v1/topics", 201, body={"name": "rec", "partitions": 4})
    return "rec"


def fetch(http, topic, partition, offset, **params):
    query = "&".join(f"{k}={v}" for k, v in {"offset": offset, **params}.items())
    return http.json("GET", f"/v1/topics/{topic}/partitions/{partition}/records?{query}")


def test_json_produce_then_fetch_in_order(http, topic):
    body = {"records": [{"value": f"v{i}", "partition": 2, "timestamp": 1000 + i} for i in range(5)]}
    offsets = http.json("POST", f"/v1/topics/{topic}/records", body=body)["offsets"]
    assert offsets == [{"partition": 2, "offset": i} for i in range(5)]
    got = fetch(http, topic, 2, 0)
    assert [r["value"] for r in got["records"]] == [f"v{i}" for i in range(5)]
    assert [r["timestamp"] for r in got["records"]] == [1000 + i for i in range(5)]
    assert got["next_offset"] == 5 and got["high_watermark"] == 5
    assert [r["offset"] for r in fetch(http, topic, 2, 3)["records"]] == [3, 4]
    limited = fetch(http, topic, 2, 1, max_records=2)
    assert [r["offset"] for r in limited["records"]] == [1, 2] and limited["next_offset"] == 3
    assert fetch(http, topic, 2, 5)["records"] == []


def test_same_key_same_partition_and_keyless_round_robin(http, topic):
    placed = {http.json("POST", f"/v1/topics/{topic}/records",
                        body={"records": [{"key": "user-7", "value": str(i)}]})["offsets"][0]["partition"]
              for i in range(6)}
    assert len(placed) == 1
    keyless = [http.json("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": "x"}, {"value": "y"}]})
               ["offsets"] for _ in range(8)]
    assert all(o[0]["partition"] == o[1]["partition"] for o in keyless), "one batch goes to one partition"
    assert len({o[0]["partition"] for o in keyless}) == 4, "batches rotate over the partitions"


def test_headers_binary_values_and_base64_encoding(http, topic):
    record = {"key_b64": base64.b64encode(b"\xff\x00k").decode(), "value_b64": base64.b64encode(b"\x80bin").decode(),
              "headers": [["trace", "abc"], {"name": "trace", "value_b64": base64.b64encode(b"\xfe").decode()}],
              "partition": 1}
    offset = http.json("POST", f"/v1/topics/{topic}/records", body={"records": [record]})["offsets"][0]["offset"]
    got = fetch(http, topic, 1, offset)["records"][0]
    assert base64.b64decode(got["key_b64"]) == b"\xff\x00k" and "key" not in got
    assert base64.b64decode(got["value_b64"]) == b"\x80bin"
    assert got["headers"][0] == {"name": "trace", "value": "abc"}
    assert got["headers"][1]["name"] == "trace" and base64.b64decode(got["headers"][1]["value_b64"]) == b"\xfe"
    forced = fetch(http, topic, 1, offset, encoding="base64")["records"][0]
    assert base64.b64decode(forced["headers"][0]["value_b64"]) == b"abc"


def test_msgpack_produce(http, topic):
    body = msgpack.packb({"records": [{"key": b"k\x00", "value": b"\x01\x02", "headers": [["h", b"\x03"]],
                                       "partition": 3}]}, use_bin_type=True)
    reply = http.call("POST", f"/v1/topics/{topic}/records", raw=body, content_type="application/x-msgpack")
    assert reply.status == 200
    offset = reply.json()["offsets"][0]["offset"]
    got = fetch(http, topic, 3, offset, encoding="base64")["records"][0]
    assert base64.b64decode(got["value_b64"]) == b"\x01\x02"


def test_prebuilt_batch_and_raw_fetch_round_trip(http, topic):
    records = [ProducerRecord(f"batch-{i}".encode() * 50, key=b"k", headers=(("n", b"v"),), timestamp=5000 + i)
               for i in range(2000)]
    batch = encode_batch(records)
    assert len(batch) > 64 * 1024, "large enough for the sendfile path"
    reply = http.call("POST", f"/v1/topics/{topic}/records?partition=0&acks=all", raw=batch, content_type=BATCH)
    assert reply.status == 200
    base = reply.json()["offsets"][0]["offset"]
    raw = http.call("GET", f"/v1/topics/{topic}/partitions/0/records?offset={base}&max_bytes=10000000",
                    headers={"Accept": BATCH})
    assert raw.status == 200 and raw.headers["content-type"] == BATCH
    assert int(raw.headers["x-logbroker-next-offset"]) == base + 2000
    decoded = [r for pos, h in iter_batches(raw.data) for r in decode_records(raw.data[pos:pos + h.size_bytes])]
    assert [r.value for r in decoded] == [r.value for r in records]
    assert [r.offset for r in decoded] == list(range(base, base + 2000))
    assert decoded[0].headers == [("n", b"v")] and decoded[5].timestamp == 5005
    empty = http.call("GET", f"/v1/topics/{topic}/partitions/0/records?offset={base + 2000}",
                      headers={"Accept": BATCH})
    assert empty.status == 200 and empty.data == b"" and empty.headers["x-logbroker-next-offset"] == str(base + 2000)


def test_offsets_earliest_latest_and_by_time(http):
    http.json("POST", "/v1/topics", 201, body={"name": "times"})
    body = {"records": [{"value": str(i), "timestamp": 10_000 + 100 * i} for i in range(10)]}
    for record in body["records"]:
        http.json("POST", "/v1/topics/times/records", body={"records": [record]})
    path = "/v1/topics/times/partitions/0/offsets?at="
    assert http.json("GET", path + "earliest")["offset"] == 0
    assert http.json("GET", path + "latest")["offset"] == 10
    assert http.json("GET", path + "10450")["offset"] == 5
    assert http.json("GET", path + "99999")["offset"] == 10
    assert http.call("GET", path + "yesterday").status == 400


def test_acks_zero_and_all(http, topic):
    for acks in ("0", "1", "all"):
        reply = http.call("POST", f"/v1/topics/{topic}/records?acks={acks}", body={"records": [{"value": acks}]})
        assert reply.status == 200
    assert http.call("POST", f"/v1/topics/{topic}/records?acks=2", body={"records": [{"value": "x"}]}).status == 400


def test_raw_fetches_reuse_one_keep_alive_connection(http, topic):
    import http.client as httpclient

    batch = encode_batch([ProducerRecord(b"k" * 200) for _ in range(1000)])
    for _ in range(3):
        assert http.call("POST", f"/v1/topics/{topic}/records?partition=1", raw=batch, content_type=BATCH).status == 200
    connection = httpclient.HTTPConnection(http.host, http.port, timeout=30)
    try:
        offset, seen = 0, 0
        for _ in range(50):
            connection.request("GET", f"/v1/topics/{topic}/partitions/1/records?offset={offset}&max_bytes=300000",
                               headers={"Accept": BATCH})
            response = connection.getresponse()
            data = response.read()
            assert response.status == 200
            seen += sum(h.record_count for _, h in iter_batches(data))
            offset = int(response.getheader("X-LogBroker-Next-Offset"))
            if offset == int(response.getheader("X-LogBroker-High-Watermark")):
                break
        assert seen >= 3000
    finally:
        connection.close()
