"""Pure record handling: produce body parsing, partition choice, taking fetched records, JSON
rendering."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import InvalidRequestError
from logbroker.records import (
    Skipped,
    group_by_partition,
    is_reserved_header,
    iter_fetched_records,
    key_partition,
    parse_body,
    render_records,
    take_records,
)
from segments.batch import Record, encode_values
from segments.compression import Codec
from tests.segments.test_batch import forge
from tests.support.poison import poison_batch


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
    records, stopped_at, skipped = take_records(fetched(*sizes, codec=codec), from_offset, records_max)
    assert skipped == []
    expected = list(range(from_offset, min(total, from_offset + records_max)))
    assert [r.offset for r in records] == expected
    assert [r.value for r in records] == [str(o).encode() for o in expected]
    assert stopped_at == (expected[-1] + 1 if len(expected) == records_max else None)


def with_poison(sizes: list[int], poisoned: int, bad_at: int, codec: Codec) -> bytes:
    """``fetched(*sizes)`` where batch ``poisoned`` has a bad record at ``bad_at`` (its values are
    the offsets too)."""
    out, base = [], 0
    for n, size in enumerate(sizes):
        values = [str(base + i).encode() for i in range(size)]
        if n == poisoned:
            out.append(poison_batch(values, bad_at, codec=codec, base_offset=base))
        else:
            batch = bytearray(encode_values(values, codec=codec))
            batch[0:8] = base.to_bytes(8, "little")
            out.append(bytes(batch))
        base += size
    return b"".join(out)


@given(st.lists(st.integers(1, 20), min_size=1, max_size=4), st.sampled_from(list(Codec)), st.data())
def test_an_undecodable_batch_is_skipped_and_reported_and_the_records_around_it_are_taken(sizes, codec, data):
    """A stored batch whose record ``bad_at`` cannot be decoded gives its records before that one;
    the rest of it is skipped (and named), and the batches after it are read as usual, whether
    the answer decodes batches whole, in part (``max_records``) or one record at a time (push)."""
    poisoned = data.draw(st.integers(0, len(sizes) - 1))
    bad_at = data.draw(st.integers(0, sizes[poisoned] - 1))
    start = sum(sizes[:poisoned])
    total = sum(sizes)
    from_offset = data.draw(st.integers(0, total - 1))
    # Records before the offset asked for are passed over unread: a reader past the bad one reads on.
    bad = from_offset <= start + bad_at
    bad_offsets = set(range(start + bad_at, start + sizes[poisoned])) if bad else set()
    records_max = data.draw(st.integers(1, total + 2))
    fetched_data = with_poison(sizes, poisoned, bad_at, codec)
    records, stopped_at, skipped = take_records(fetched_data, from_offset, records_max)
    readable = [o for o in range(from_offset, total) if o not in bad_offsets]
    assert [r.offset for r in records] == readable[:records_max]
    assert [r.value for r in records] == [str(r.offset).encode() for r in records]
    if stopped_at is None:
        assert len(records) < records_max or records[-1].offset == readable[-1]
    reached = stopped_at if stopped_at is not None else total
    if bad and reached > start + bad_at:
        assert [(s.first_offset, s.next_offset) for s in skipped] == [(start + bad_at, start + sizes[poisoned])]
    else:
        assert skipped == []
    pushed: list[Skipped] = []
    streamed = list(iter_fetched_records(fetched_data, from_offset, pushed))
    assert [r.offset for r in streamed] == readable
    expected = [(start + bad_at, start + sizes[poisoned])] if bad else []
    assert [(s.first_offset, s.next_offset) for s in pushed] == expected
    assert all("integers" in s.reason or "bytes or nil" in s.reason for s in pushed)


def test_a_batch_that_is_not_msgpack_at_all_is_skipped_whole():
    bad = forge(b"\xc1", count=1)
    good = fetched(3)
    records, stopped_at, skipped = take_records(good + (3).to_bytes(8, "little") + bad[8:], 0, 10)
    assert [r.offset for r in records] == [0, 1, 2] and stopped_at is None
    assert [(s.first_offset, s.next_offset) for s in skipped] == [(3, 4)]


@pytest.mark.parametrize("name", ["x-logbro\u212aer-queue", "X-LOGBROKER-x", "x-logbroker-", "x-LogBroKer-offset"])
def test_a_reserved_header_name_is_recognised_in_any_case_unicode_too(name):
    assert is_reserved_header(name)
    with pytest.raises(InvalidRequestError, match="broker's own"):
        parse_body({"records": [{"value": "v", "headers": [[name, "x"]]}]}, binary=False)


@pytest.mark.parametrize("name", ["x-logbroker", "my-x-logbroker-queue", "x_logbroker-q", "x-logbroker\u0130-"])
def test_other_names_are_not_reserved(name):
    assert not is_reserved_header(name)


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
