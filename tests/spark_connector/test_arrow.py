"""Raw batches to Arrow: the same records as ``segments.batch.decode_records``, in Spark's schema."""

from __future__ import annotations

import msgpack
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.batch import ProducerRecord, decode_records, encode_batch
from segments.compression import Codec
from segments.errors import InvalidBatchError
from spark_connector import fastdecode
from spark_connector.arrow import ArrowBuilder, to_chunk
from spark_connector.schema import arrow_schema

blobs = st.one_of(st.none(), st.binary(max_size=20))
headers = st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=3)
records = st.builds(ProducerRecord, blobs, blobs, headers, st.integers(0, 2**40))
batches = st.lists(st.lists(records, min_size=1, max_size=20), min_size=1, max_size=5)


def _encode(groups: list[list[ProducerRecord]]) -> list[bytes]:
    out, base = [], 0
    for group in groups:
        out.append(encode_batch(group, base_offset=base))
        base += len(group)
    return out


@settings(max_examples=60)
@given(batches, st.integers(0, 60), st.integers(0, 60), st.integers(1, 7))
def test_arrow_rows_match_decoded_records(groups, start, length, rows_per_batch):
    raw = _encode(groups)
    end = start + length
    builder = ArrowBuilder("topic", 3, start, end, rows_per_batch=rows_per_batch)
    out = [b for batch in raw for b in builder.add_batch(batch)] + list(builder.finish())
    assert all(b.schema.equals(arrow_schema()) for b in out)
    rows = [row for b in out for row in b.to_pylist()]
    expected = [r for batch in raw for r in decode_records(batch) if start <= r.offset < end]
    assert [(r["offset"], r["key"], r["value"], r["partition"], r["topic"]) for r in rows] == \
        [(r.offset, r.key, r.value, 3, "topic") for r in expected]
    micros = [t for b in out for t in b.column("timestamp").cast(pa.int64()).to_pylist()]
    assert micros == [r.timestamp * 1000 for r in expected]
    assert [dict(r["headers"]) for r in rows] == [dict(r.headers) for r in expected]
    assert builder.rows == len(expected)


def test_a_corrupt_batch_is_an_error_not_rows():
    raw = bytearray(encode_batch([ProducerRecord(b"value")]))
    raw[-1] ^= 0xFF
    with pytest.raises(InvalidBatchError, match="checksum"):
        list(ArrowBuilder("t", 0, 0, 10).add_batch(bytes(raw)))


plain = st.builds(ProducerRecord, blobs, blobs, st.just(()), st.integers(-(2**40), 2**40))


@given(st.lists(st.lists(plain, min_size=1, max_size=30), min_size=1, max_size=4), st.sampled_from(list(Codec)))
def test_the_compiled_decoder_takes_plain_batches_and_agrees_with_decode_records(groups, codec):
    for raw in [encode_batch(group, base_offset=7, codec=codec) for group in groups]:
        fast = fastdecode.decode(raw)
        assert fast is not None
        expected = decode_records(raw)
        assert fast.offsets.tolist() == [r.offset for r in expected]
        assert fast.timestamps.tolist() == [r.timestamp for r in expected]
        chunk = to_chunk(raw)
        assert chunk.keys.to_pylist() == [r.key for r in expected]
        assert chunk.values.to_pylist() == [r.value for r in expected]


scalars = st.one_of(st.integers(-(2**63), 2**64 - 1), st.booleans(), st.none(), st.binary(max_size=8),
                    st.text(max_size=4), st.floats(allow_nan=False))
rows = st.lists(st.one_of(scalars, st.lists(scalars, max_size=6)), max_size=6)


@given(st.lists(rows, min_size=1, max_size=6), st.integers(0, 8))
def test_any_records_section_decodes_the_same_or_fails_the_same_in_both_decoders(section_rows, count):
    """Hand-made records sections (wrong shapes, strings, bools, big ints, deltas out of order):
    the compiled decoder either agrees with decode_records or declines and lets it decide."""
    raw = _batch_with_section(msgpack.packb(section_rows, use_bin_type=True), count)
    try:
        expected = decode_records(raw)
    except InvalidBatchError:
        expected = None
    fast = fastdecode.decode(raw)
    if fast is not None:
        assert expected is not None
        assert fast.offsets.tolist() == [r.offset for r in expected]
        assert fast.timestamps.tolist() == [r.timestamp for r in expected]
    if expected is None:
        with pytest.raises(InvalidBatchError):
            to_chunk(raw)
    else:
        assert to_chunk(raw).values.to_pylist() == [r.value for r in expected]


def _batch_with_section(section: bytes, count: int) -> bytes:
    from segments.batch import _assemble  # the codec's own framing around a hand-made section

    return _assemble(section, count=max(1, count), first_ts=1000, max_ts=1000, base_offset=7, leader_epoch=0,
                     codec=Codec.NONE, producer=(-1, -1, -1))
