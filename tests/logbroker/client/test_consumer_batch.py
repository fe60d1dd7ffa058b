"""Columnar consumer batches: ``decode_fetched`` against the per-record decoder, on arbitrary runs
of batches and starting offsets (pure; no node)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.client.consumer_batch import ConsumerBatch, ConsumerRecord, decode_fetched
from segments.batch import ProducerRecord, decode_columns, decode_records, encode_batch, encode_values, iter_batches
from segments.compression import Codec
from segments.errors import CorruptBatchError

TS = st.integers(-(2**40), 2**40)
RECORDS = st.lists(
    st.builds(ProducerRecord, value=st.none() | st.binary(max_size=24), key=st.none() | st.binary(max_size=8),
              headers=st.lists(st.tuples(st.text(max_size=4), st.binary(max_size=4)), max_size=2),
              timestamp=st.none() | TS),
    min_size=1, max_size=6)
CODECS = st.sampled_from(list(Codec))


def fetched_run(batches: list[list[ProducerRecord]], codec: Codec, first: int, gap: int) -> bytes:
    """Batches as a fetch returns them: consecutive, ``gap`` offsets apart (gaps appear where
    retention or compaction removed batches)."""
    out, base = [], first
    for records in batches:
        out.append(encode_batch(records, base_offset=base, codec=codec, timestamp_ms=1_000))
        base += len(records) + gap
    return b"".join(out)


@given(st.lists(RECORDS, min_size=1, max_size=5), CODECS, st.integers(0, 2**40), st.integers(0, 3), st.data())
def test_columns_match_the_record_decoder(batches, codec, first, gap, data) -> None:
    raw = fetched_run(batches, codec, first, gap)
    expected = [r for chunk in _chunks(raw) for r in decode_records(chunk)]
    from_offset = data.draw(st.integers(first, expected[-1].offset + 1))
    wanted = [r for r in expected if r.offset >= from_offset]

    batch = decode_fetched(raw, "t", 3, from_offset)

    assert len(batch) == len(wanted)
    assert list(batch.offsets) == [r.offset for r in wanted]
    assert list(batch.timestamps) == [r.timestamp for r in wanted]
    assert list(batch.keys) == [r.key for r in wanted]
    assert list(batch.values) == [r.value for r in wanted]
    assert [list(h) for h in batch.headers] == [r.headers for r in wanted]
    assert list(batch) == [ConsumerRecord("t", 3, *r) for r in wanted]
    if wanted:
        assert batch.next_offset == wanted[-1].offset + 1


def test_contiguous_batches_keep_offsets_as_a_range() -> None:
    raw = fetched_run([[ProducerRecord(b"a")] * 3, [ProducerRecord(b"b")] * 2], Codec.NONE, 10, 0)
    batch = decode_fetched(raw, "t", 0, 11)
    assert batch.offsets == range(11, 15) and batch.values == (b"a", b"a", b"b", b"b")
    gapped = decode_fetched(fetched_run([[ProducerRecord(b"a")]] * 2, Codec.NONE, 10, 5), "t", 0, 0)
    assert list(gapped.offsets) == [10, 16]


def test_records_are_built_only_when_iterated_and_each_has_its_own_header_list() -> None:
    raw = encode_batch([ProducerRecord(b"v", b"k", [("h", b"1")], 5), ProducerRecord(b"w", None, [], 6)])
    batch = decode_fetched(raw, "t", 1, 0)
    first, second = batch.records()
    assert first == ConsumerRecord("t", 1, 0, 5, b"k", b"v", [("h", b"1")]) and first.value == b"v"
    first.headers.append(("x", b""))
    assert batch.records()[0].headers == [("h", b"1")] and second.headers == []


def test_nothing_fetched_is_an_empty_batch() -> None:
    assert len(decode_fetched(b"", "t", 0, 0)) == 0
    assert list(decode_fetched(encode_values([b"a", b"b"]), "t", 0, 2)) == []


def test_a_corrupt_batch_raises_instead_of_yielding_records() -> None:
    raw = bytearray(fetched_run([[ProducerRecord(b"a" * 20)] * 4] * 3, Codec.NONE, 0, 0))
    raw[len(raw) // 2] ^= 0xFF
    with pytest.raises(CorruptBatchError):
        decode_fetched(bytes(raw), "t", 0, 0)


def test_a_truncated_trailing_batch_is_left_for_the_next_fetch() -> None:
    raw = fetched_run([[ProducerRecord(b"a")] * 2] * 2, Codec.NONE, 0, 0)
    batch = decode_fetched(raw[:-3], "t", 0, 0)
    assert list(batch.offsets) == [0, 1]


@pytest.mark.parametrize("values", [[b"x"] * 1000, [b"x", None] * 10])
def test_decode_columns_fast_paths_agree_with_records(values) -> None:
    buf = encode_values(values)
    columns, records = decode_columns(buf), decode_records(buf)
    assert list(columns.values) == [r.value for r in records] and columns.keys == (None,) * len(values)
    assert columns.offsets == range(len(values)) and len(set(columns.timestamps)) == 1


def test_consumer_batch_is_immutable() -> None:
    batch = decode_fetched(encode_values([b"a"]), "t", 0, 0)
    assert isinstance(batch, ConsumerBatch)
    with pytest.raises(AttributeError):
        batch.topic = "u"  # type: ignore[misc]


def _chunks(raw: bytes) -> list[bytes]:
    view = memoryview(raw)
    return [bytes(view[p:p + h.size_bytes]) for p, h in iter_batches(view)]
