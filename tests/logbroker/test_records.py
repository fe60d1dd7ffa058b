"""Pure record handling: produce body parsing, partition choice, taking fetched records, JSON
rendering."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import InvalidRequestError, UnreadableRecordsError
from logbroker.records import group_by_partition, key_partition, parse_body, render_records, take_records
from segments.batch import Record, encode_values
from segments.compression import Codec
from tests.segments.test_batch import forge


def fetched(*sizes: int, codec: Codec = Codec.NONE) -> bytes:
    """Batches of the given record counts, at consecutive offsets; values are the offsets."""
    out, base = [], 0
    for size in sizes:
        batch = bytearray(encode_values([str(base + i).encode() for i in range(size)], codec=codec))
        batch[0:8] = base.to_bytes(8, "little")
        out.append(bytes(batch))
        base += size
    return b"".join(out)


@given(st.lists(st.integers(1, 30), min_size=1, max_size=5), st.sampled_from(list(Codec)), st.data())
def test_take_records_takes_the_first_wanted_from_the_offset(sizes, codec, data):
    total = sum(sizes)
    from_offset = data.draw(st.integers(0, total - 1))
    records_max = data.draw(st.integers(1, total + 2))
    records, stopped_at = take_records(fetched(*sizes, codec=codec), from_offset, records_max)
    expected = list(range(from_offset, min(total, from_offset + records_max)))
    assert [r.offset for r in records] == expected
    assert [r.value for r in records] == [str(o).encode() for o in expected]
    assert stopped_at == (expected[-1] + 1 if len(expected) == records_max else None)


def test_an_undecodable_batch_ends_the_answer_before_it_or_is_unreadable_first():
    bad = forge(b"\xc1", count=1)
    good = fetched(3)
    records, stopped_at = take_records(good + (3).to_bytes(8, "little") + bad[8:], 0, 10)
    assert [r.offset for r in records] == [0, 1, 2] and stopped_at == 3
    with pytest.raises(UnreadableRecordsError):
        take_records(bad, 0, 10)


def test_json_body_forms():
    parsed = parse_body({"records": [
        {"value": "a"},
        {"key": "k", "value_b64": base64.b64encode(b"\x00\xff").decode(), "partition": 2, "timestamp": 7,
         "headers": {"x": "1"}},
        {"headers": [["h", "v"], {"name": "h", "value_b64": "AA=="}]},
    ]}, binary=False)
    assert parsed[0].record.value == b"a" and parsed[0].partition is None
    assert parsed[1].record == (b"\x00\xff", b"k", [("x", b"1")], 7) and parsed[1].partition == 2
    assert parsed[2].record.value is None and parsed[2].record.headers == [("h", b"v"), ("h", b"\x00")]


def test_msgpack_body_accepts_bytes_but_json_does_not():
    body = {"records": [{"value": b"\x01", "headers": [["h", b"\x02"]]}]}
    assert parse_body(body, binary=True)[0].record.value == b"\x01"
    with pytest.raises(InvalidRequestError):
        parse_body(body, binary=False)


def test_grouping_keeps_request_order_and_hashes_keys():
    records = parse_body({"records": [{"key": "a", "value": "1"}, {"value": "2"}, {"key": "a", "value": "3"},
                                      {"value": "4", "partition": 0}]}, binary=False)
    groups = group_by_partition(records, 3, round_robin=4)
    expected: dict[int, list[int]] = {}
    for index, partition in enumerate([key_partition(b"a", 3), 4 % 3, key_partition(b"a", 3), 0]):
        expected.setdefault(partition, []).append(index)
    assert groups == expected


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=64))
def test_key_partition_is_stable_and_in_range(key, partitions):
    first = key_partition(key, partitions)
    assert 0 <= first < partitions and key_partition(key, partitions) == first


def test_render_uses_text_when_it_can():
    rendered = render_records([Record(5, 9, b"k", b"\xff", [("h", b"ok"), ("b", b"\x80")])], force_base64=False)[0]
    assert rendered["key"] == "k" and base64.b64decode(rendered["value_b64"]) == b"\xff"
    assert rendered["headers"] == [{"name": "h", "value": "ok"}, {"name": "b", "value_b64": "gA=="}]
    assert render_records([Record(1, 1, None, None, [])], force_base64=True)[0]["value"] is None


@given(st.lists(st.fixed_dictionaries({"value": st.text(max_size=30)},
                                      optional={"key": st.text(max_size=10)}), min_size=1, max_size=20),
       st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=100))
def test_grouping_assigns_every_record_exactly_once(records, partitions, rr):
    groups = group_by_partition(parse_body({"records": records}, binary=False), partitions, rr)
    flat = [i for g in groups.values() for i in g]
    assert sorted(flat) == list(range(len(records)))
    assert all(g == sorted(g) for g in groups.values())
    assert all(0 <= p < partitions for p in groups)
