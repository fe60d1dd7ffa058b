"""Raw batches to Arrow: the same records as ``segments.batch.decode_records``, in Spark's schema."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.batch import ProducerRecord, decode_records, encode_batch
from segments.errors import InvalidBatchError
from spark_connector.arrow import ArrowBuilder
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
