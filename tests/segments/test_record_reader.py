"""``iter_records`` decodes lazily what ``decode_records`` decodes at once: same records, same
refusals for what it reads; and ``open_section`` yields what ``decompress`` does, bounded."""

from __future__ import annotations

import itertools
import tracemalloc

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.batch import HEADER_SIZE, ProducerRecord, decode_records, encode_batch, encode_values
from segments.compression import Codec, compress, decompress, open_section
from segments.errors import InvalidBatchError, RecordsTooLargeError
from segments.record_reader import WHOLE_SECTION_BYTES_MAX, iter_records
from tests.segments.test_batch import CODECS, RECORDS, ROW, forge

MIB = 1024 * 1024


def read_all(codec: Codec, data: bytes, size_bytes_max: int, chunk: int) -> bytes:
    section = open_section(int(codec), data, size_bytes_max)
    parts = []
    while piece := section.read(chunk):
        parts.append(piece)
    return b"".join(parts)


@given(RECORDS, CODECS, st.integers(0, 2**40), st.data())
def test_lazy_records_are_the_eager_ones(records, codec, base, data) -> None:
    batch = encode_batch(records, base_offset=base, codec=codec, timestamp_ms=5)
    from_offset = data.draw(st.integers(base - 2, base + len(records) + 1))
    eager = [r for r in decode_records(batch) if r.offset >= from_offset]
    assert list(iter_records(batch, from_offset=from_offset)) == eager


@given(CODECS, st.binary(max_size=200))
def test_arbitrary_sections_decode_the_same_or_are_refused_by_both(codec, section) -> None:
    batch = forge(section, codec=int(codec))
    try:
        eager = decode_records(batch)
    except InvalidBatchError:
        with pytest.raises(InvalidBatchError):
            list(iter_records(batch))
        return
    assert list(iter_records(batch)) == eager


@pytest.mark.parametrize("section", [
    b"",
    b"\xc1",
    msgpack.packb([ROW]) + b"\x00",
    msgpack.packb({"a": 1}),
    msgpack.packb([ROW, ROW], use_bin_type=True),
    msgpack.packb([[1, 0, None, b"v", []]], use_bin_type=True),
    msgpack.packb([[True, 0, None, b"v", []]], use_bin_type=True),
    msgpack.packb([[0, 0.0, None, b"v", []]], use_bin_type=True),
    msgpack.packb([[0, 0, "key", b"v", []]], use_bin_type=True),
    msgpack.packb([[0, 0, None, b"v", [[b"h", b"x"]]]], use_bin_type=True),
])
def test_malformed_sections_are_refused(section: bytes) -> None:
    with pytest.raises(InvalidBatchError):
        list(iter_records(forge(section)))


def test_records_after_the_ones_taken_are_not_read() -> None:
    section = b"\x92" + msgpack.packb(ROW, use_bin_type=True) + b"\xc1"  # a good record, then garbage
    batch = forge(section, count=2)
    first = next(iter_records(batch))
    assert (first.offset, first.value) == (0, b"v")
    with pytest.raises(InvalidBatchError):
        list(iter_records(batch))
    with pytest.raises(InvalidBatchError):
        decode_records(batch)


def test_a_read_from_the_middle_skips_to_its_record() -> None:
    batch = encode_values([str(i).encode() for i in range(200_000)], timestamp_ms=7, codec=Codec.ZSTD)
    taken = list(itertools.islice(iter_records(batch, from_offset=150_000), 2))
    assert [(r.offset, r.value, r.timestamp) for r in taken] == [(150_000, b"150000", 7), (150_001, b"150001", 7)]


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_the_first_record_of_a_bomb_costs_one_chunk_of_memory(codec: Codec) -> None:
    bomb = encode_batch([ProducerRecord(b"first"), ProducerRecord(bytes(48 * MIB))], codec=codec)
    tracemalloc.start()
    try:
        first = next(iter_records(bomb))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first.value == b"first"
    assert peak < 4 * MIB
    with pytest.raises(RecordsTooLargeError):
        list(iter_records(bomb, size_bytes_max=16 * MIB))


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("chunk", [1, 777, 1 << 16, 1 << 24])
def test_a_section_read_in_pieces_is_the_decompressed_section(codec: Codec, chunk: int) -> None:
    plain = bytes(range(256)) * 2000 + bytes(300_000)
    data = compress(codec, plain)
    if chunk == 1:  # every byte on its own: the first few thousand are enough
        section = open_section(int(codec), data, len(plain))
        assert b"".join(section.read(1) for _ in range(5000)) == plain[:5000]
        return
    assert read_all(codec, data, len(plain), chunk) == plain == bytes(decompress(int(codec), data, len(plain)))


@pytest.mark.parametrize("codec", list(Codec))
def test_a_section_past_its_bound_is_too_large(codec: Codec) -> None:
    plain = bytes(1_000_000)
    with pytest.raises(RecordsTooLargeError):
        read_all(codec, compress(codec, plain), len(plain) - 1, 1 << 16)
    if codec != Codec.NONE:  # uncompressed data is returned as given, whatever its size
        with pytest.raises(RecordsTooLargeError):
            decompress(int(codec), compress(codec, plain), len(plain) - 1)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4])
def test_a_truncated_section_is_invalid(codec: Codec) -> None:
    data = compress(codec, bytes(range(256)) * 4000)
    with pytest.raises(InvalidBatchError, match="truncated"):
        read_all(codec, data[:len(data) // 2], 10 * MIB, 1 << 16)


def test_the_records_section_starts_after_the_header() -> None:
    batch = encode_values([b"a", b"b"], codec=Codec.LZ4)
    assert read_all(Codec.LZ4, batch[HEADER_SIZE:], MIB, 3) == msgpack.packb(
        [[0, 0, None, b"a", []], [1, 0, None, b"b", []]], use_bin_type=True)


@pytest.mark.parametrize("records", [10, 2_000])  # a section under and over WHOLE_SECTION_BYTES_MAX
def test_small_sections_unpacked_whole_and_large_ones_in_chunks_give_the_same_records(records: int) -> None:
    values = [f"value-{i:05d}-".encode() * 4 for i in range(records)]
    batch = encode_values(values, timestamp_ms=9)
    assert (len(batch) - HEADER_SIZE > WHOLE_SECTION_BYTES_MAX) == (records == 2_000)
    taken = list(iter_records(batch, from_offset=records // 2))
    assert [(r.offset, r.value) for r in taken] == [(i, values[i]) for i in range(records // 2, records)]
    assert taken == [r for r in decode_records(batch) if r.offset >= records // 2]
