"""Kafka's records section as a stored format: the compiled reader against the reference decoder,
the producer-side check, and stored batches of that format read through every reader of a batch."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_api.record_batch import encode_batch as kafka_batch
from segments import kafka_records
from segments.batch import (
    KAFKA_RECORDS_FLAG,
    decode_columns,
    decode_records,
    validate_batch,
    wrap_section,
)
from segments.compaction import compact_batch, latest_offsets
from segments.errors import InvalidBatchError, RecordsTooLargeError
from segments.record_reader import iter_records
from tests.support.kafka_bytes import raw_record, zigzag

KAFKA_HEADER_BYTES = 61
header_names = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
blobs = st.none() | st.binary(max_size=40)
stamps = st.integers(-(2**61), 2**61)
records_strategy = st.lists(st.tuples(stamps, blobs, blobs, st.lists(st.tuples(header_names, blobs), max_size=3)),
                            min_size=1, max_size=40)
Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def section_of(records: list[Rec], codec: int = 0) -> bytes:
    """The records section of the Kafka batch a producer would send for ``records``."""
    return kafka_batch(0, records, compression=codec)[KAFKA_HEADER_BYTES:]


def stored(records: list[Rec], *, base_offset: int = 0, codec: int = 0) -> bytes:
    """A stored batch in Kafka's record format, as the Kafka listener writes it."""
    first = records[0][0]
    return wrap_section(section_of(records, codec), attributes=codec | KAFKA_RECORDS_FLAG, count=len(records),
                        first_ts=first, max_ts=max(r[0] for r in records), producer=(-1, -1, -1),
                        base_offset=base_offset)


def plain_headers(headers: list[tuple[str, bytes | None]]) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, b"" if value is None else value) for name, value in headers)


@settings(max_examples=80)
@given(records=records_strategy, base_offset=st.integers(0, 2**40), codec=st.sampled_from([0, 1, 2, 3, 4]))
def test_a_stored_kafka_batch_reads_the_same_through_every_reader(records: list[Rec], base_offset: int,
                                                                    codec: int) -> None:
    batch = stored(records, base_offset=base_offset, codec=codec)
    columns = decode_columns(batch)
    assert list(columns.offsets) == list(range(base_offset, base_offset + len(records)))
    assert list(columns.timestamps) == [r[0] for r in records]
    assert columns.keys == tuple(r[1] for r in records)
    assert columns.values == tuple(r[2] for r in records)
    assert columns.headers == tuple(plain_headers(r[3]) for r in records)
    assert columns.has_headers == any(r[3] for r in records)
    decoded = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in decoded] == [
        (base_offset + i, r[0], r[1], r[2], plain_headers(r[3])) for i, r in enumerate(records)]
    middle = base_offset + len(records) // 2
    tail = [r.offset for r in iter_records(batch, from_offset=middle)]
    assert tail == list(range(middle, base_offset + len(records)))
    assert list(iter_records(batch)) == decoded


@settings(max_examples=300)
@given(records=records_strategy, data=st.data())
def test_what_produce_accepts_every_reader_reads_alike(records: list[Rec], data: st.DataObject) -> None:
    """Bytes changed anywhere in a section: when the producer-side check lets it through, the
    compiled reader's columns are the reference decoder's records (and the Java Spark reader's,
    tests/spark_connector/test_jvm_codec.py). Base timestamp 0: every timestamp fits."""
    section = bytearray(section_of([(abs(r[0]) % 10**6, *r[1:]) for r in records]))
    for _ in range(data.draw(st.integers(1, 3))):
        section[data.draw(st.integers(0, len(section) - 1))] = data.draw(st.integers(0, 255))
    count, changed = len(records), bytes(section)
    try:
        low, high, _ = kafka_records.produced_facts(changed, count, 0)
    except InvalidBatchError:
        return  # never stored
    reference = kafka_records.records(changed, count, 0)
    columns = kafka_records.columns(0, count, 0, 0, False, changed)
    assert list(columns[1]) == [row[1] for row in reference] and (low, high) == (min(columns[1]), max(columns[1]))
    assert columns[2] == tuple(row[2] for row in reference)
    assert columns[3] == tuple(row[3] for row in reference)
    assert columns[4] == tuple(plain_headers(list(row[4])) for row in reference)


@settings(max_examples=200)
@given(section=st.binary(max_size=300), count=st.integers(1, 20))
def test_any_bytes_raise_only_invalid_batch_error(section: bytes, count: int) -> None:
    for call in (lambda: kafka_records.columns(0, count, 0, 0, False, section),
                 lambda: kafka_records.produced_facts(section, count, 0)):
        with contextlib.suppress(InvalidBatchError):
            call()


@settings(max_examples=100)
@given(records=records_strategy)
def test_produced_facts_are_the_records_timestamps_and_headers(records: list[Rec]) -> None:
    low, high, headers = kafka_records.produced_facts(section_of(records), len(records), records[0][0])
    assert (low, high) == (min(r[0] for r in records), max(r[0] for r in records))
    assert headers == [tuple(r[3]) for r in records if r[3]]


@pytest.mark.parametrize("attributes", [b"\x80\x00", b"\xff\x01", b"\x80", b"\x08", b"\x01"])
def test_a_records_attributes_byte_other_than_0_is_refused_at_produce(attributes: bytes) -> None:
    """aiokafka's reader takes the attributes as a varint, Kafka's as one byte, and librdkafka reads
    its bit 3 as log-append time: such a record would read differently through the doors."""
    section = raw_record(0, attributes=attributes)
    with pytest.raises(InvalidBatchError, match="attributes byte"):
        kafka_records.produced_facts(section, 1, 0)


@pytest.mark.parametrize("body", [
    b"\x00" + zigzag(0) + zigzag(0) + zigzag(-2) + zigzag(1) + b"v" + zigzag(0),
    b"\x00" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(1) + b"v" + zigzag(1) + zigzag(1) + b"h" + zigzag(-3),
], ids=["key length -2", "header value length -3"])
def test_a_length_below_minus_one_is_refused_at_produce(body: bytes) -> None:
    """Kafka writes -1 for null; librdkafka fails on a record with any other negative length (its
    consumer stalls there), aiokafka takes it for null: never stored."""
    with pytest.raises(InvalidBatchError, match=r"length -[23]"):
        kafka_records.produced_facts(zigzag(len(body)) + body, 1, 0)


def test_a_timestamp_past_int64_is_refused_though_the_compiled_reader_wraps_it() -> None:
    """Base -2^62 and a delta of -2^63: aiokafka adds in int64 and reads 2^62, within the broker's
    range; the reference decoder and the Java reader refuse it, so produce does."""
    section = raw_record(0, ts_delta=0) + raw_record(1, ts_delta=-(2**63))
    with pytest.raises(InvalidBatchError, match="overflows int64"):
        kafka_records.produced_facts(section, 2, -(2**62))


def test_header_counts_are_bounded_before_any_reader_builds_them() -> None:
    many = zigzag(kafka_records.HEADERS_PER_RECORD_MAX + 1) + (zigzag(0) + zigzag(-1)) * \
        (kafka_records.HEADERS_PER_RECORD_MAX + 1)
    with pytest.raises(InvalidBatchError, match="headers"):
        kafka_records.produced_facts(raw_record(0, headers=many), 1, 0)
    per_record = kafka_records.HEADERS_PER_BATCH_MAX // 20 + 1
    each = zigzag(per_record) + (zigzag(0) + zigzag(-1)) * per_record
    with pytest.raises(InvalidBatchError, match="headers in one batch"):
        kafka_records.records(b"".join(raw_record(i, headers=each) for i in range(20)), 20, 0)


def test_a_non_canonical_but_valid_section_is_judged_by_the_reference_decoder() -> None:
    """A varint longer than it needs (valid Kafka, not what its writers write) leaves the fast path;
    the reference decoder accepts it, and the compiled reader reads it alike."""
    body = b"\x00" + zigzag(0) + b"\x80\x00" + zigzag(-1) + zigzag(1) + b"v" + zigzag(0)  # offset delta 0, two bytes
    section = zigzag(len(body)) + body
    assert kafka_records.produced_facts(section, 1, 7) == (7, 7, [])
    columns = kafka_records.columns(5, 1, 7, 7, False, section)
    assert (list(columns[0]), columns[3]) == ([5], (b"v",))


def test_an_overlong_varint_is_refused() -> None:
    """Six bytes for a 32-bit varint: Kafka's Java reader refuses it, so the broker does too."""
    body = b"\x00" + zigzag(0) + b"\x80\x80\x80\x80\x80\x00" + zigzag(-1) + zigzag(1) + b"v" + zigzag(0)
    with pytest.raises(InvalidBatchError, match="longer than 5 bytes"):
        kafka_records.produced_facts(zigzag(len(body)) + body, 1, 0)


def test_offset_gaps_are_refused() -> None:
    section = raw_record(0) + raw_record(2)
    with pytest.raises(InvalidBatchError, match="offset delta"):
        kafka_records.produced_facts(section, 2, 0)
    with pytest.raises(InvalidBatchError, match="offset delta"):
        kafka_records.columns(0, 2, 0, 0, False, section)


def test_log_append_time_gives_every_record_the_batch_time() -> None:
    section = section_of([(1, None, b"a", []), (2, None, b"b", [])])
    assert kafka_records.columns(0, 2, 1, 99, True, section)[1] == [99, 99]


def test_decompress_takes_one_stream_as_every_kafka_reader_reads_it() -> None:
    """librdkafka reads only a gzip section's first member, Kafka's Java reader only the first LZ4
    frame and neither takes dependent LZ4 blocks; librdkafka refuses a cut or followed zstd frame."""
    import zlib

    import lz4.frame
    import zstandard

    def gz(data: bytes) -> bytes:
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()

    assert kafka_records.decompress(1, gz(b"abcd"), 100) == b"abcd"
    for bad in (gz(b"ab") + gz(b"cd"), gz(b"ab") + b"junk"):
        with pytest.raises(InvalidBatchError, match="gzip"):
            kafka_records.decompress(1, bad, 100)
    with pytest.raises(RecordsTooLargeError):
        kafka_records.decompress(1, gz(b"x" * 1000), 100)
    frame = lz4.frame.compress(b"abcd", block_linked=False)
    assert kafka_records.decompress(3, frame, 100) == b"abcd"
    dependent = frame[:4] + bytes([frame[4] & ~0x20]) + frame[5:]  # the block-independence flag cleared
    for bad in (frame + frame, dependent, frame + b"x"):
        with pytest.raises(InvalidBatchError, match="lz4"):
            kafka_records.decompress(3, bad, 100)
    zframe = zstandard.ZstdCompressor(write_checksum=True).compress(b"abcd" * 100)
    assert kafka_records.decompress(4, zframe, 1000) == b"abcd" * 100
    for bad in (zframe + zframe, zframe + b"\x28\xb5\x2f\xfd", zframe[:-2]):
        with pytest.raises(InvalidBatchError, match="zstd"):
            kafka_records.decompress(4, bad, 1000)
    with pytest.raises(InvalidBatchError, match="unknown compression codec 5"):
        kafka_records.decompress(5, b"x", 100)


def test_the_header_accepts_snappy_only_for_kafka_batches() -> None:
    records: list[Rec] = [(5, b"k", b"v", [])]
    batch = stored(records, codec=2)
    assert validate_batch(batch).codec == 2
    own = bytearray(batch)
    attributes_at = 25
    struct.pack_into("<H", own, attributes_at, 2)  # the same codec without the Kafka flag
    with pytest.raises(InvalidBatchError, match="unknown batch attributes"):
        validate_batch(bytes(own))


def test_compaction_rewrites_a_kafka_batch_in_the_brokers_format() -> None:
    records: list[Rec] = [(1, b"a", b"1", []), (2, b"b", b"2", [("h", None)]), (3, b"a", b"3", [])]
    batch = stored(records, base_offset=10, codec=2)
    latest = latest_offsets([(validate_batch(batch), batch)])
    assert latest == {b"a": 12, b"b": 11}
    kept, stats = compact_batch(batch, validate_batch(batch), latest, tombstone_before_ms=0)
    assert stats.records_kept == 2
    rewritten = b"".join(bytes(part) for part in kept)
    assert not validate_batch(rewritten).attributes & KAFKA_RECORDS_FLAG
    assert [(r.offset, r.key, r.value, r.headers) for r in decode_records(rewritten)] == [
        (11, b"b", b"2", [("h", b"")]), (12, b"a", b"3", [])]


@settings(max_examples=60)
@given(records=records_strategy, base_offset=st.integers(0, 2**40), data=st.data())
def test_reading_from_an_offset_builds_only_the_records_from_there(records: list[Rec], base_offset: int,
                                                                  data: st.DataObject) -> None:
    batch = stored(records, base_offset=base_offset)
    start = base_offset + data.draw(st.integers(0, len(records)))
    expected = [(base_offset + i, r[0], r[1], r[2], list(plain_headers(r[3]))) for i, r in enumerate(records)
                if base_offset + i >= start]
    assert [tuple(r) for r in iter_records(batch, from_offset=start)] == expected


def test_a_section_the_compiled_reader_refuses_midway_is_read_on_by_the_reference() -> None:
    """Past the records the compiled reader read, the reference decoder says what is wrong: the
    records before the bad one are yielded, then InvalidBatchError."""
    section = section_of([(1, None, b"a", []), (2, None, b"b", [])]) + raw_record(2, key=None)[:-1] + b"\x03"
    got = []
    with pytest.raises(InvalidBatchError):
        for row in kafka_records.iter_records(0, 3, 1, 2, False, section, 0):
            got.append(row[3])
    assert got == [b"a", b"b"]
