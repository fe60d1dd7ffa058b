"""Record batch codec: round-trips, patching, corruption detection and bounded decompression."""

from __future__ import annotations

import struct
import tracemalloc

import msgpack
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from segments.batch import (
    HEADER_SIZE,
    LENGTH_PREFIX_SIZE,
    PREFIX_SIZE,
    ProducerRecord,
    Record,
    decode_records,
    encode_batch,
    encode_values,
    iter_batches,
    patch_in_place,
    patched_prefix,
    validate_batch,
)
from segments.compression import Codec
from segments.errors import CorruptBatchError, InvalidArgumentError, InvalidBatchError

TS = st.integers(-(2**62), 2**62)
HEADER_NAMES = st.sampled_from(["trace", "trace", "id", ""]) | st.text(max_size=8)
HEADERS = st.lists(st.tuples(HEADER_NAMES, st.binary(max_size=16)), max_size=4)
RECORDS = st.lists(
    st.builds(
        ProducerRecord,
        value=st.none() | st.binary(max_size=48),
        key=st.none() | st.binary(max_size=16),
        headers=HEADERS,
        timestamp=st.none() | TS,
    ),
    min_size=1,
    max_size=8,
)
CODECS = st.sampled_from(list(Codec))
SAMPLE = [
    ProducerRecord(b"v0", b"k0", [("h", b"1"), ("h", b"2")], 1_000),
    ProducerRecord(None, None, [], 990),
    ProducerRecord(b"value-2" * 3, b"", [("x", b"")], 1_010),
]


def forge(section: bytes, *, codec: int = 0, count: int = 1, attributes: int | None = None,
          magic: int = 1) -> bytes:
    """A batch around an arbitrary records section, with a correct checksum (built from the spec)."""
    attributes = codec if attributes is None else attributes
    body = struct.pack("<HIqqqhiI", attributes, (count - 1) % 2**32, 0, 0, -1, -1, -1, count)
    checksum = xxhash.xxh3_64_intdigest(body + section)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(section), 0)
    return prefix + bytes((magic,)) + struct.pack("<Q", checksum) + body + section


def expected_records(records: list[ProducerRecord], base: int, default_ts: int) -> list[Record]:
    return [
        Record(base + i, default_ts if r.timestamp is None else r.timestamp, r.key, r.value, list(r.headers))
        for i, r in enumerate(records)
    ]


def test_header_layout_matches_the_documented_offsets() -> None:
    buf = encode_batch(SAMPLE, base_offset=7, leader_epoch=3, producer_id=42, producer_epoch=-2,
                       base_sequence=9, codec=Codec.GZIP)
    assert (HEADER_SIZE, PREFIX_SIZE, LENGTH_PREFIX_SIZE) == (65, 16, 12)
    assert struct.unpack_from("<QII", buf, 0) == (7, len(buf) - 12, 3)
    assert buf[16] == 1
    assert struct.unpack_from("<Q", buf, 17)[0] == xxhash.xxh3_64_intdigest(buf[25:])
    assert struct.unpack_from("<HIqqqhiI", buf, 25) == (int(Codec.GZIP), 2, 1_000, 1_010, 42, -2, 9, 3)
    header = validate_batch(buf)
    assert (header.size_bytes, header.last_offset, header.next_offset, header.codec) == (len(buf), 9, 10, 1)
    plain = encode_values([b"abc"], timestamp_ms=5)
    assert plain[HEADER_SIZE:] == msgpack.packb([[0, 0, None, b"abc", []]], use_bin_type=True)


@given(RECORDS, CODECS, TS, st.integers(0, 2**63 - 1), st.integers(0, 2**32 - 1),
       st.integers(-1, 2**63 - 1), st.integers(-(2**15), 2**15 - 1), st.integers(-(2**31), 2**31 - 1))
def test_round_trip(records, codec, default_ts, base, epoch, pid, pepoch, seq) -> None:
    buf = encode_batch(records, base_offset=base, leader_epoch=epoch, codec=codec, producer_id=pid,
                       producer_epoch=pepoch, base_sequence=seq, timestamp_ms=default_ts)
    header = validate_batch(buf)
    stamps = [default_ts if r.timestamp is None else r.timestamp for r in records]
    assert header.size_bytes == len(buf) and header.magic == 1 and header.codec == codec
    assert (header.base_offset, header.leader_epoch, header.record_count) == (base, epoch, len(records))
    assert (header.first_timestamp, header.max_timestamp) == (stamps[0], max(stamps))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (pid, pepoch, seq)
    assert decode_records(buf) == expected_records(records, base, default_ts)


@given(RECORDS, CODECS, st.integers(0, 2**63 - 1), st.integers(0, 2**32 - 1))
def test_patching_keeps_the_checksum_and_shifts_offsets(records, codec, base, epoch) -> None:
    buf = encode_batch(records, codec=codec, timestamp_ms=1)
    header = validate_batch(buf)
    prefix = patched_prefix(header, base, epoch)
    assert len(prefix) == PREFIX_SIZE
    patched = prefix + buf[PREFIX_SIZE:]
    mutable = bytearray(buf)
    patch_in_place(mutable, base, epoch)
    assert bytes(mutable) == patched
    assert patched == encode_batch(records, codec=codec, timestamp_ms=1, base_offset=base, leader_epoch=epoch)
    moved = validate_batch(patched)
    assert moved.checksum == header.checksum
    assert (moved.base_offset, moved.leader_epoch) == (base, epoch)
    assert decode_records(patched) == [r._replace(offset=r.offset + base) for r in decode_records(buf)]


@pytest.mark.parametrize("codec", list(Codec))
def test_every_bit_flip_after_the_prefix_is_detected(codec: Codec) -> None:
    buf = encode_batch(SAMPLE, base_offset=3, leader_epoch=2, codec=codec)
    for bit in range(PREFIX_SIZE * 8, len(buf) * 8):
        flipped = bytearray(buf)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(InvalidBatchError):
            validate_batch(flipped)
        with pytest.raises(InvalidBatchError):
            decode_records(bytes(flipped))
        if 17 <= bit // 8 < 25 or bit // 8 >= HEADER_SIZE:  # stored checksum or records: only the checksum
            with pytest.raises(CorruptBatchError):
                validate_batch(flipped)


@given(RECORDS, CODECS, st.data())
def test_random_bit_flip_after_the_prefix_is_detected(records, codec, data) -> None:
    buf = encode_batch(records, codec=codec, timestamp_ms=0)
    bit = data.draw(st.integers(PREFIX_SIZE * 8, len(buf) * 8 - 1))
    flipped = bytearray(buf)
    flipped[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(InvalidBatchError):
        decode_records(bytes(flipped))


@pytest.mark.parametrize("codec", list(Codec))
def test_bit_flips_in_the_prefix(codec: Codec) -> None:
    buf = encode_batch(SAMPLE, base_offset=1000, leader_epoch=5, codec=codec)
    original = decode_records(buf)
    for bit in range(PREFIX_SIZE * 8):
        flipped = bytearray(buf)
        flipped[bit // 8] ^= 1 << (bit % 8)
        if 8 <= bit // 8 < 12:  # batch_length
            with pytest.raises(InvalidBatchError):
                decode_records(bytes(flipped))
            continue
        base, _, epoch = struct.unpack_from("<QII", flipped, 0)
        header = validate_batch(flipped)
        assert (header.base_offset, header.leader_epoch) == (base, epoch)
        assert decode_records(bytes(flipped)) == [r._replace(offset=r.offset - 1000 + base) for r in original]


@given(RECORDS, CODECS, st.data())
def test_truncated_or_extended_buffers_are_rejected(records, codec, data) -> None:
    buf = encode_batch(records, codec=codec, timestamp_ms=0)
    cut = data.draw(st.integers(0, len(buf) - 1))
    with pytest.raises(InvalidBatchError):
        validate_batch(buf[:cut])
    with pytest.raises(InvalidBatchError):
        decode_records(buf[:cut])
    extra = data.draw(st.binary(min_size=1, max_size=80))
    with pytest.raises(InvalidBatchError):
        validate_batch(buf + extra)
    with pytest.raises(InvalidBatchError):
        decode_records(buf + extra)


@given(st.lists(st.tuples(RECORDS, CODECS), min_size=1, max_size=5), st.data())
def test_iter_batches(batches, data) -> None:
    bufs = [encode_batch(r, codec=c, base_offset=i * 100, timestamp_ms=0) for i, (r, c) in enumerate(batches)]
    joined = b"".join(bufs)
    positions = [sum(len(b) for b in bufs[:i]) for i in range(len(bufs))]
    expected = [(p, validate_batch(b)) for p, b in zip(positions, bufs, strict=True)]
    assert list(iter_batches(joined)) == expected
    assert list(iter_batches(memoryview(joined))) == expected
    cut = data.draw(st.integers(1, len(bufs[-1]) - 1))
    assert list(iter_batches(joined[:-cut])) == expected[:-1]
    partial = data.draw(st.integers(1, len(bufs[0]) - 1))
    assert list(iter_batches(joined + bufs[0][:partial])) == expected


def test_iter_batches_raises_on_a_complete_corrupt_batch() -> None:
    first, second = encode_batch(SAMPLE, timestamp_ms=0), encode_batch(SAMPLE, base_offset=3, timestamp_ms=0)
    damaged = bytearray(first + second)
    damaged[len(first) + 70] ^= 0x10
    it = iter_batches(bytes(damaged))
    assert next(it) == (0, validate_batch(first))
    with pytest.raises(CorruptBatchError) as info:
        next(it)
    assert info.value.position == len(first)
    assert list(iter_batches(b"")) == []


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=10), TS, CODECS)
def test_encode_values_matches_encode_batch(values, ts, codec) -> None:
    fast = encode_values(values, timestamp_ms=ts, codec=codec)
    assert fast == encode_batch([ProducerRecord(v) for v in values], timestamp_ms=ts, codec=codec)
    assert decode_records(fast) == [Record(i, ts, None, v, []) for i, v in enumerate(values)]


def test_empty_batches_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError):
        encode_batch([])
    with pytest.raises(InvalidArgumentError):
        encode_values([])


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_decompression_bombs_are_rejected(codec: Codec) -> None:
    bomb = encode_values([bytes(4_000_000)], timestamp_ms=0, codec=codec)
    limit = 64 * 1024
    assert len(bomb) < limit
    validate_batch(bomb, size_bytes_max=limit)
    with pytest.raises(InvalidBatchError):
        decode_records(bomb, size_bytes_max=limit)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_decompression_of_a_bomb_is_bounded_in_memory(codec: Codec) -> None:
    bomb = encode_values([bytes(32 * 1024 * 1024)], timestamp_ms=0, codec=codec)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidBatchError):
            decode_records(bomb, size_bytes_max=256 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_decompression_limit_is_exact(codec: Codec) -> None:
    values = [bytes(range(256)) * 40] * 5
    section_size = len(encode_values(values, timestamp_ms=0)) - HEADER_SIZE
    buf = encode_values(values, timestamp_ms=0, codec=codec)
    assert len(buf) < section_size
    assert len(decode_records(buf, size_bytes_max=section_size)) == 5
    with pytest.raises(InvalidBatchError):
        decode_records(buf, size_bytes_max=section_size - 1)


ROW = [0, 0, None, b"v", []]


@pytest.mark.parametrize(
    "section",
    [
        b"",
        b"\xc1",  # never-used msgpack byte
        msgpack.packb([ROW]) + b"\x00",  # extra data
        msgpack.packb({"a": 1}),
        msgpack.packb([ROW, ROW], use_bin_type=True),  # two rows for a count of one
        msgpack.packb([[0, 0, None, b"v"]], use_bin_type=True),
        msgpack.packb([[1, 0, None, b"v", []]], use_bin_type=True),  # delta past last_offset_delta
        msgpack.packb([[-1, 0, None, b"v", []]], use_bin_type=True),
        msgpack.packb([[True, 0, None, b"v", []]], use_bin_type=True),
        msgpack.packb([[False, 0, None, b"v", []]], use_bin_type=True),
        msgpack.packb([[0, 0.5, None, b"v", []]], use_bin_type=True),
        msgpack.packb([[0, 0.0, None, b"v", []]], use_bin_type=True),
        msgpack.packb([[0, False, None, b"v", []]], use_bin_type=True),
        msgpack.packb([[0, 0, None, b"v", []], [1, 0, None, b"v", []]], use_bin_type=True),  # count is 1
        msgpack.packb([[0, 0, None, b"v", [], 5]], use_bin_type=True),
        msgpack.packb([b"01234"], use_bin_type=True),
        msgpack.packb(["01234"], use_bin_type=True),
        msgpack.packb([[0, 0, "key", b"v", []]], use_bin_type=True),
        msgpack.packb([[0, 0, None, 7, []]], use_bin_type=True),
        msgpack.packb([[0, 0, None, b"v", {}]], use_bin_type=True),
        msgpack.packb([[0, 0, None, b"v", [["h"]]]], use_bin_type=True),
        msgpack.packb([[0, 0, None, b"v", [[b"h", b"x"]]]], use_bin_type=True),
        msgpack.packb([[0, 0, None, b"v", [["h", "x"]]]], use_bin_type=True),
    ],
)
def test_well_checksummed_but_malformed_sections_are_rejected(section: bytes) -> None:
    with pytest.raises(InvalidBatchError):
        decode_records(forge(section))


def test_forged_header_fields_are_checked() -> None:
    good = msgpack.packb([ROW], use_bin_type=True)
    assert decode_records(forge(good)) == [Record(0, 0, None, b"v", [])]
    for bad in (forge(good, magic=2), forge(good, codec=2), forge(good, attributes=1 << 4),
                forge(good, count=0), forge(good, codec=int(Codec.ZSTD))):
        with pytest.raises(InvalidBatchError):
            decode_records(bad)
    with pytest.raises(InvalidBatchError):
        validate_batch(forge(good), size_bytes_max=len(forge(good)) - 1)


@given(CODECS, st.binary(max_size=200))
def test_arbitrary_sections_decode_or_raise_invalid_batch(codec, section) -> None:
    try:
        records = decode_records(forge(section, codec=int(codec)))
    except InvalidBatchError:
        return
    assert len(records) == 1 and records[0].offset == 0
