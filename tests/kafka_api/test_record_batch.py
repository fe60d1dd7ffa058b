"""Kafka record batch v2 codec: round trips, kafka-python as an independent codec, and hostile bytes.

The broker's encoder and header check (``kafka_api.record_batch``) are read back and driven by the
tests' reference decoder (``tests.support.kafka_decoder``). Hostile batches are built here with a
small encoder of the tests' own (``tests.support.kafka_bytes``, ``_raw_batch``) so that a bug in the
module's encoder cannot hide the same bug in its decoder.
"""

from __future__ import annotations

import contextlib
import functools
import struct
import tracemalloc
import warnings
import zlib
from collections.abc import Sequence

import cramjam
import crc32c
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_api.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    RecordBatchError,
    UnsupportedBatch,
    UnsupportedCompression,
    encode_batch,
)
from tests.support.kafka_bytes import raw_record, zigzag
from tests.support.kafka_decoder import KafkaBatch, KafkaRecord, decode_batches

try:
    with warnings.catch_warnings():  # kafka-python's protocol schemas use deprecated importlib.resources calls
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import codec as kafka_codec
        from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
except ImportError:  # pragma: no cover - the cross-check is skipped, the golden bytes below still run
    kafka_codec = None

needs_kafka_python = pytest.mark.skipif(kafka_codec is None, reason="kafka-python is not installed")

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

ALL_CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
COMPRESSED_CODECS = ALL_CODECS[1:]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MIB = 1024 * 1024
LIMITS = {"records_max": 10_000, "uncompressed_bytes_max": 16 * MIB}
HEADER = struct.Struct(">qiibIhiqqqhii")
CRC_FROM = 21  # the CRC covers attributes to the end
BASE_OFFSET_BYTES = range(0, 8)  # fields outside the CRC that decode fine whatever their value
LEADER_EPOCH_BYTES = range(12, 16)

# Two records (create time 1_700_000_000_000 and +5 ms), checked field by field against the schema in the
# module docstring, and byte-equal to kafka-python 3.0.12's DefaultRecordBatchBuilder output.
GOLDEN_RECORDS: list[Record] = [
    (1_700_000_000_000, b"key", b"value", [("trace", b"t1")]),
    (1_700_000_000_005, None, b"v2", [("n", None)]),
]
GOLDEN_BATCH = bytes.fromhex(
    "0000000000000000"  # base_offset 0
    "00000055"  # batch_length 85
    "00000000"  # partition_leader_epoch 0
    "02"  # magic
    "62cca6b8"  # CRC32C
    "0000"  # attributes: no compression, create time
    "00000001"  # last_offset_delta
    "0000018bcfe56800"  # base_timestamp
    "0000018bcfe56805"  # max_timestamp
    "ffffffffffffffff"  # producer_id -1
    "ffff"  # producer_epoch -1
    "ffffffff"  # base_sequence -1
    "00000002"  # record count
    "2e" "00" "00" "00" "06" "6b6579" "0a" "76616c7565" "02" "0a" "7472616365" "04" "7431"  # record 0
    "16" "00" "0a" "02" "01" "04" "7632" "02" "02" "6e" "01"  # record 1
)

header_names = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
blobs = st.none() | st.binary(max_size=40)
timestamps = st.integers(-(2**62), 2**62 - 1)  # any two differ by less than 2**63
record_strategy = st.tuples(timestamps, blobs, blobs, st.lists(st.tuples(header_names, blobs), max_size=3))
records_strategy = st.lists(record_strategy, max_size=50)
nonempty_records_strategy = st.lists(record_strategy, min_size=1, max_size=50)


def expected(records: Sequence[Record], offset_deltas: Sequence[int] | None = None) -> tuple[KafkaRecord, ...]:
    deltas = range(len(records)) if offset_deltas is None else offset_deltas
    return tuple(
        KafkaRecord(delta, ts, key, value, tuple(headers))
        for delta, (ts, key, value, headers) in zip(deltas, records, strict=True)
    )


def decode(data: bytes | bytearray | memoryview, **limits: int) -> list[KafkaBatch]:
    return decode_batches(data, **{**LIMITS, **limits})


# ---------------------------------------------------------------------------------- a test-side encoder


def _raw_batch(section: bytes, *, count: int, last_offset_delta: int | None = None, attributes: int = 0,
               base_timestamp: int = 0, magic: int = 2, batch_length: int | None = None) -> bytes:  # fmt: skip
    length = HEADER.size - 12 + len(section) if batch_length is None else batch_length
    last = count - 1 if last_offset_delta is None else last_offset_delta
    header = HEADER.pack(0, length, 0, magic, 0, attributes, last, base_timestamp, base_timestamp, -1, -1, -1, count)
    return _reseal(header + section)


def _reseal(batch: bytes | bytearray) -> bytes:
    """The batch with its CRC recomputed, so the decoder's later checks are what get tested."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[CRC_FROM:])))
    return bytes(out)


def _sections(codec: int, plain: bytes) -> bytes:
    """``plain`` compressed as a producer would, by the libraries directly (not through the module)."""
    if codec == COMPRESSION_GZIP:
        return _gzip(plain)
    if codec == COMPRESSION_SNAPPY:
        block = bytes(cramjam.snappy.compress_raw(plain))
        return b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    if codec == COMPRESSION_LZ4:
        compressed: bytes = lz4.frame.compress(plain, block_linked=False)
        return compressed
    assert codec == COMPRESSION_ZSTD
    return zstandard.ZstdCompressor().compress(plain)


def _gzip(plain: bytes) -> bytes:
    deflater = zlib.compressobj(6, zlib.DEFLATED, 31)
    return deflater.compress(plain) + deflater.flush()


# ---------------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", ALL_CODECS)
@settings(max_examples=60)
@given(records=records_strategy, base_offset=st.integers(INT64_MIN, INT64_MAX))
def test_round_trip(codec: int, records: list[Record], base_offset: int) -> None:
    data = encode_batch(base_offset, records, partition_leader_epoch=7, producer_id=42, producer_epoch=3,
                        base_sequence=11, compression=codec)  # fmt: skip
    [batch] = decode(data)
    assert batch.records == expected(records)
    assert (batch.base_offset, batch.partition_leader_epoch) == (base_offset, 7)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 11)
    assert (batch.attributes, batch.compression, batch.last_offset_delta) == (codec, codec, len(records) - 1)
    assert not (batch.is_transactional or batch.is_control or batch.log_append_time)
    stamps = [ts for ts, *_ in records]
    assert batch.base_timestamp == (stamps[0] if stamps else -1)
    assert batch.max_timestamp == (max(stamps) if stamps else -1)


def test_golden_bytes() -> None:
    assert encode_batch(0, GOLDEN_RECORDS, partition_leader_epoch=0) == GOLDEN_BATCH
    [batch] = decode(GOLDEN_BATCH)
    assert batch.records == expected(GOLDEN_RECORDS)
    assert (batch.base_timestamp, batch.max_timestamp) == (1_700_000_000_000, 1_700_000_000_005)


def test_batches_back_to_back_in_any_buffer_type() -> None:
    first = encode_batch(100, GOLDEN_RECORDS, compression=COMPRESSION_GZIP)
    second = encode_batch(102, [(5, b"a", b"b", [])])
    data = first + second
    for view in (data, bytearray(data), memoryview(b"junk" + data)[4:]):
        batches = decode(view)
        assert [b.base_offset for b in batches] == [100, 102]
        assert batches[0].records == expected(GOLDEN_RECORDS)
        assert batches[1].records == (KafkaRecord(0, 5, b"a", b"b", ()),)


def test_empty_input_and_empty_batch() -> None:
    assert decode(b"") == []
    [batch] = decode(encode_batch(3, []))
    assert (batch.records, batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp) == ((), -1, -1, -1)


def test_timestamps_at_the_int64_limits() -> None:
    for stamp in (INT64_MIN, INT64_MAX):
        [batch] = decode(encode_batch(0, [(stamp, None, None, []), (stamp, None, None, [])]))
        assert [r.timestamp_ms for r in batch.records] == [stamp, stamp]
    with pytest.raises(ValueError, match="int64"):  # the delta from the first record overflows a varlong
        encode_batch(0, [(INT64_MIN, None, None, []), (INT64_MAX, None, None, [])])
    with pytest.raises(ValueError, match="int64"):
        encode_batch(0, [(INT64_MAX + 1, None, None, [])])


def test_encode_rejects_bad_arguments() -> None:
    record: Record = (0, None, None, [])
    with pytest.raises(ValueError, match="codec"):
        encode_batch(0, [record], compression=5)
    with pytest.raises(ValueError, match="strictly increasing"):
        encode_batch(0, [record, record], offset_deltas=[1, 1])
    with pytest.raises(ValueError, match="offset deltas"):
        encode_batch(0, [record], offset_deltas=[0, 1])
    with pytest.raises(ValueError, match="out of range"):
        encode_batch(2**63, [record])


# ------------------------------------------------------------------------- kafka-python as an independent codec


def _kafka_python_build(records: Sequence[Record], codec: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)  # fmt: skip
    for offset, (ts, key, value, headers) in enumerate(records):
        assert builder.append(offset, ts, key, value, headers) is not None
    return bytes(builder.build())


def _kafka_python_codecs() -> list[int]:
    if kafka_codec is None:
        return []
    return [c for c in ALL_CODECS if c != COMPRESSION_SNAPPY or kafka_codec.has_snappy()]


@needs_kafka_python
@settings(max_examples=100)
@given(records=nonempty_records_strategy)
def test_uncompressed_bytes_equal_kafka_python(records: list[Record]) -> None:
    assert encode_batch(0, records, partition_leader_epoch=0) == _kafka_python_build(records, COMPRESSION_NONE)


@needs_kafka_python
@pytest.mark.parametrize("codec", _kafka_python_codecs())
@settings(max_examples=40)
@given(records=nonempty_records_strategy)
def test_decode_what_kafka_python_builds(codec: int, records: list[Record]) -> None:
    [batch] = decode(_kafka_python_build(records, codec))
    assert batch.records == expected(records)
    assert batch.compression in (codec, COMPRESSION_NONE)  # kafka-python sends plain when compressing does not pay


@needs_kafka_python
@pytest.mark.parametrize("codec", _kafka_python_codecs())
def test_decode_what_kafka_python_compresses(codec: int) -> None:
    records: list[Record] = [(1_000 + i, b"key-%d" % i, b"value " * 200, [("h", b"x" * 50)]) for i in range(20)]
    [batch] = decode(_kafka_python_build(records, codec))
    assert batch.compression == codec
    assert batch.records == expected(records)


@needs_kafka_python
@pytest.mark.parametrize("codec", _kafka_python_codecs())
@settings(max_examples=40)
@given(records=records_strategy, data=st.data())
def test_kafka_python_decodes_what_we_build(codec: int, records: list[Record], data: st.DataObject) -> None:
    gaps = data.draw(st.lists(st.integers(0, 3), min_size=len(records), max_size=len(records)))
    deltas = [sum(gaps[: i + 1]) + i for i in range(len(records))]  # strictly increasing, with gaps
    built = encode_batch(1_000, records, compression=codec, offset_deltas=deltas)
    theirs = DefaultRecordBatch(built)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert theirs.last_offset_delta == (deltas[-1] if deltas else -1)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    want = [(1_000 + d, ts, key, value, headers) for d, (ts, key, value, headers) in zip(deltas, records, strict=True)]
    assert got == want


def test_offset_gaps_are_rejected_on_decode() -> None:
    records: list[Record] = [(0, None, b"a", []), (0, None, b"b", [])]
    with pytest.raises(RecordBatchError, match="last_offset_delta 2 with 2 records"):
        decode(encode_batch(0, records, offset_deltas=[0, 2]))


# --------------------------------------------------------------------------------------------- hostile bytes


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_ZSTD])
def test_truncated_at_every_cut_point(codec: int) -> None:
    data = encode_batch(0, GOLDEN_RECORDS, compression=codec)
    two = data + data
    for cut in range(1, len(two)):
        if cut == len(data):
            assert len(decode(two[:cut])) == 1
            continue
        with pytest.raises(RecordBatchError):
            decode(two[:cut])


@settings(max_examples=200)
@given(records=records_strategy, codec=st.sampled_from(ALL_CODECS), data=st.data())
def test_a_flipped_byte_is_caught_or_harmless(records: list[Record], codec: int, data: st.DataObject) -> None:
    batch = encode_batch(5, records, compression=codec)
    index = data.draw(st.integers(0, len(batch) - 1), label="index")
    flipped = bytearray(batch)
    flipped[index] ^= data.draw(st.integers(1, 255), label="mask")
    if index in BASE_OFFSET_BYTES or index in LEADER_EPOCH_BYTES:  # outside the CRC, any value is valid
        [got] = decode(flipped)
        assert got.records == expected(records)
        assert (got.base_offset, got.partition_leader_epoch) != (5, -1)
    else:
        with pytest.raises(RecordBatchError):
            decode(flipped)


@settings(max_examples=200)
@given(records=records_strategy, codec=st.sampled_from(ALL_CODECS), data=st.data())
def test_flipped_bytes_behind_a_valid_crc_raise_only_record_batch_error(
    records: list[Record], codec: int, data: st.DataObject
) -> None:
    flipped = bytearray(encode_batch(5, records, compression=codec))
    for _ in range(data.draw(st.integers(1, 3), label="flips")):
        index = data.draw(st.integers(CRC_FROM, len(flipped) - 1), label="index")
        flipped[index] ^= data.draw(st.integers(1, 255), label="mask")
    with contextlib.suppress(RecordBatchError):
        decode(_reseal(flipped), uncompressed_bytes_max=64 * 1024)


@settings(max_examples=200)
@given(section=st.binary(max_size=80), count=st.integers(-2, 6), codec=st.sampled_from(ALL_CODECS))
def test_garbage_records_raise_only_record_batch_error(section: bytes, count: int, codec: int) -> None:
    with contextlib.suppress(RecordBatchError):
        decode(_raw_batch(section, count=count, attributes=codec), uncompressed_bytes_max=64 * 1024)


def test_wrong_magic() -> None:
    for magic in (0, 1, 3):
        bad = bytearray(GOLDEN_BATCH)
        bad[16] = magic
        with pytest.raises(RecordBatchError, match=f"magic {magic}"):
            decode(bad)


def test_crc_mismatch_names_both_values() -> None:
    bad = bytearray(GOLDEN_BATCH)
    bad[-1] ^= 0x01
    with pytest.raises(RecordBatchError, match=r"CRC mismatch, stored 0x62cca6b8, computed 0x"):
        decode(bad)


@pytest.mark.parametrize("batch_length", [-1, 0, 48, 2**31 - 1])
def test_absurd_batch_lengths(batch_length: int) -> None:
    with pytest.raises(RecordBatchError, match="batch_length"):
        decode(_raw_batch(raw_record(0), count=1, batch_length=batch_length))


ELEVEN_BYTE_VARINT = b"\xff" * 10 + b"\x01"
NO_KEY_NO_VALUE_NO_HEADERS = b"\x01\x01\x00"


def _framed(body: bytes) -> bytes:
    """A record body behind its correct length varint."""
    return zigzag(len(body)) + body


@pytest.mark.parametrize(
    ("section", "count", "message"),
    [
        (zigzag(2**31 - 1) + raw_record(0)[1:], 1, "record 0 at byte 5: length 2147483647"),
        (ELEVEN_BYTE_VARINT + raw_record(0)[1:], 1, "varint at byte 0 is longer than 5 bytes"),
        (b"\xff\xff\xff\xff\x7f" + raw_record(0)[1:], 1, "varint at byte 0 overflows int32"),
        (_framed(b"\x00" + ELEVEN_BYTE_VARINT + b"\x00" + NO_KEY_NO_VALUE_NO_HEADERS), 1, "longer than 10 bytes"),
        (_framed(b"\x00\x00\x00" + zigzag(2**31 - 1) + b"ab\x01\x00"), 1, r"key at byte 9: length 2147483647"),
        (_framed(b"\x00\x00\x00" + zigzag(-2) + b"\x01\x00"), 1, "key at byte 5: length -2"),
        (raw_record(0, value=b"\x00" * 3, length=8), 1, "value at byte 7: length 3, 2 bytes left"),
        (raw_record(0, headers=zigzag(2**31 - 1)), 1, "header count 2147483647"),
        (raw_record(0, headers=zigzag(-1)), 1, "header count -1"),
        (raw_record(0, headers=b"\x02" + zigzag(2**31 - 1) + b"ab"), 1, "header key at byte 14: length 2147483647"),
        (raw_record(0, headers=b"\x02" + zigzag(-1) + b"\x01"), 1, "header key at byte 10: length -1"),
        (raw_record(0, headers=b"\x02\x02\xff\x01"), 1, "header key at byte 10 is not UTF-8"),
        (raw_record(0, headers=b"\x00\x00"), 1, "record 0: 1 bytes left over after its headers"),
        (raw_record(0) + b"\x00", 1, "1 bytes left over after 1 records"),
        (raw_record(0), 2, "2 records cannot fit"),
        (raw_record(0) * 4, 2**31 - 1, "2147483647 records cannot fit"),
        (raw_record(1) + raw_record(0), 2, "record 0: offset delta 1, want 0"),
        (raw_record(0) + raw_record(2), 2, "record 1: offset delta 2, want 1"),
        (raw_record(0, ts_delta=1), 1, "record 0: timestamp .* overflows int64"),
    ],
)
def test_absurd_records(section: bytes, count: int, message: str) -> None:
    base_timestamp = INT64_MAX if "timestamp" in message else 0
    with pytest.raises(RecordBatchError, match=message):
        decode(_raw_batch(section, count=count, base_timestamp=base_timestamp), records_max=2**31)


def test_a_valid_header_value_may_be_null() -> None:
    [batch] = decode(_raw_batch(raw_record(0, headers=b"\x02\x02a\x01"), count=1))
    assert batch.records[0].headers == (("a", None),)


@pytest.mark.parametrize(("count", "last_offset_delta"), [(-1, -2), (2, 0), (0, 0), (1, 1)])
def test_count_must_match_last_offset_delta(count: int, last_offset_delta: int) -> None:
    section = raw_record(0) * max(count, 0)
    with pytest.raises(RecordBatchError, match=r"record count|last_offset_delta"):
        decode(_raw_batch(section, count=count, last_offset_delta=last_offset_delta))


def test_records_max_counts_over_all_batches() -> None:
    three = encode_batch(0, [(0, None, None, [])] * 3)
    assert len(decode(three, records_max=3)[0].records) == 3
    with pytest.raises(RecordBatchError, match="3 records exceed the 2 still allowed"):
        decode(three, records_max=2)
    with pytest.raises(RecordBatchError, match=f"batch at position {len(three)}: 3 records exceed the 2 still"):
        decode(three + three, records_max=5)


def test_uncompressed_bytes_max_counts_over_all_batches() -> None:
    batch = encode_batch(0, [(0, None, bytes(600 * 1024), [])], compression=COMPRESSION_GZIP)
    assert len(decode(batch, uncompressed_bytes_max=MIB)) == 1
    with pytest.raises(RecordBatchError, match="more than the"):
        decode(batch + batch, uncompressed_bytes_max=MIB)


@pytest.mark.parametrize("attributes", [0x10, 0x20, 0x30, 0x40])
def test_transactional_control_and_compacted_batches_are_unsupported(attributes: int) -> None:
    with pytest.raises(UnsupportedBatch):
        decode(_raw_batch(raw_record(0), count=1, attributes=attributes))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompression) as caught:
        decode(_raw_batch(raw_record(0), count=1, attributes=codec))
    assert caught.value.codec == codec
    assert isinstance(caught.value, RecordBatchError)


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_producer_compressed_sections_decode(codec: int) -> None:
    plain = raw_record(0, key=b"a" * 100) + raw_record(1, value=None)
    [batch] = decode(_raw_batch(_sections(codec, plain), count=2, attributes=codec))
    assert [r.key for r in batch.records] == [b"a" * 100, b"k"]


def test_raw_snappy_as_librdkafka_writes_it() -> None:
    plain = raw_record(0, value=b"librdkafka" * 30)
    [batch] = decode(_raw_batch(bytes(cramjam.snappy.compress_raw(plain)), count=1, attributes=COMPRESSION_SNAPPY))
    assert batch.records[0].value == b"librdkafka" * 30


def test_concatenated_gzip_members_are_refused() -> None:
    """Kafka's Java reader reads every member, librdkafka only the first: not one batch to both."""
    plain = raw_record(0, value=b"x" * 50) + raw_record(1)
    section = _gzip(plain[:30]) + _gzip(plain[30:])
    with pytest.raises(RecordBatchError, match="one member only"):
        decode(_raw_batch(section, count=2, attributes=COMPRESSION_GZIP))


@pytest.mark.parametrize("codec", COMPRESSED_CODECS)
def test_truncated_compressed_streams(codec: int) -> None:
    section = _sections(codec, raw_record(0, value=b"payload" * 40))
    for cut in range(0, len(section)):
        with pytest.raises(RecordBatchError):
            decode(_raw_batch(section[:cut], count=1, attributes=codec))


# ------------------------------------------------------------------------------------------------- bombs


@functools.cache
def _bomb(codec: int, zeros_bytes: int = 200 * MIB) -> bytes:
    """``zeros_bytes`` of zeros compressed, streamed so the test never holds them."""
    chunk = bytes(MIB)
    if codec == COMPRESSION_GZIP:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [compressor.compress(chunk) for _ in range(zeros_bytes // MIB)]
        return b"".join([*parts, compressor.flush()])
    if codec == COMPRESSION_ZSTD:
        zstd = zstandard.ZstdCompressor(level=3).compressobj()
        parts = [zstd.compress(chunk) for _ in range(zeros_bytes // MIB)]
        return b"".join([*parts, zstd.flush()])
    assert codec == COMPRESSION_LZ4
    lz4_compressor = lz4.frame.LZ4FrameCompressor(block_linked=False)
    parts = [lz4_compressor.begin(), *(lz4_compressor.compress(chunk) for _ in range(zeros_bytes // MIB))]
    return b"".join([*parts, lz4_compressor.flush()])


def _peak_python_bytes(data: bytes, bytes_max: int) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(RecordBatchError, match=r"decompresses to more than the \d+ bytes still allowed"):
            decode(data, uncompressed_bytes_max=bytes_max)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_ZSTD, COMPRESSION_LZ4])
def test_compression_bomb_is_refused_within_its_allowance(codec: int) -> None:
    batch = _raw_batch(_bomb(codec), count=1, attributes=codec)
    assert _peak_python_bytes(batch, MIB) < 4 * MIB


def test_snappy_blocks_declaring_huge_sizes_are_refused_before_allocating() -> None:
    raw_block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 8  # preamble: 4 GiB - 1 uncompressed
    xerial = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(raw_block)) + raw_block
    for section in (raw_block, xerial):
        batch = _raw_batch(section, count=1, attributes=COMPRESSION_SNAPPY)
        assert _peak_python_bytes(batch, MIB) < 4 * MIB
    block = bytes(cramjam.snappy.compress_raw(bytes(600 * 1024)))
    two_blocks = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(block)) + block) * 2
    assert _peak_python_bytes(_raw_batch(two_blocks, count=1, attributes=COMPRESSION_SNAPPY), MIB) < 4 * MIB


def test_zstd_frame_asking_for_a_huge_window_is_refused() -> None:
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27)
    zstd = zstandard.ZstdCompressor(compression_params=params).compressobj()  # streamed: no content size
    section = zstd.compress(raw_record(0)) + zstd.flush()
    assert zstandard.get_frame_parameters(section).window_size == 2**27
    with pytest.raises(RecordBatchError, match="zstd"):
        decode(_raw_batch(section, count=1, attributes=COMPRESSION_ZSTD), uncompressed_bytes_max=MIB)


def test_empty_compressed_section() -> None:
    with pytest.raises(RecordBatchError, match="empty"):
        decode(_raw_batch(b"", count=0, attributes=COMPRESSION_ZSTD))
