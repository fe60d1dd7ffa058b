"""``check_batch``: what a produced batch may hold (records, decompressed bytes, the records section's
array length), checked with bounded memory; batches within the bounds pass unchanged."""

from __future__ import annotations

import struct
import tracemalloc

import msgpack
import pytest
import xxhash
import zstandard

from logbroker.batch_limits import check_batch
from segments.batch import (
    BATCH_RECORDS_BYTES_MAX,
    BATCH_RECORDS_MAX,
    HEADER_SIZE,
    LENGTH_PREFIX_SIZE,
    ProducerRecord,
    encode_batch,
    encode_values,
)
from segments.compression import Codec, compress
from segments.errors import CorruptBatchError, InvalidBatchError, RecordsTooLargeError

MIB = 1024 * 1024
COMPRESSED = [Codec.GZIP, Codec.LZ4, Codec.ZSTD]


def empty_rows(count: int) -> bytes:
    """A records section of ``count`` empty records, packed directly (fast for millions)."""
    packer = msgpack.Packer(use_bin_type=True)
    return packer.pack_array_header(count) + b"".join(packer.pack([i, 0, None, b"", []]) for i in range(count))


def batch_around(section: bytes, *, count: int, codec: Codec = Codec.NONE) -> bytes:
    """A batch whose records section is ``section`` compressed with ``codec``, checksummed."""
    packed = compress(codec, section)
    body = struct.pack("<HIqqqhiI", int(codec), count - 1, 0, 0, -1, -1, -1, count)
    checksum = xxhash.xxh3_64_intdigest(body + packed)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(packed), 0)
    return prefix + b"\x01" + struct.pack("<Q", checksum) + body + packed


@pytest.mark.parametrize("codec", list(Codec))
def test_batches_within_the_bounds_pass(codec: Codec) -> None:
    batch = encode_batch([ProducerRecord(b"v", b"k", [("h", b"x")]), ProducerRecord(None)], codec=codec)
    assert check_batch(batch).header.record_count == 2
    full = batch_around(empty_rows(BATCH_RECORDS_MAX), count=BATCH_RECORDS_MAX, codec=codec)
    assert check_batch(full).header.record_count == BATCH_RECORDS_MAX


def test_a_zstd_batch_of_a_million_empty_records_is_too_large() -> None:
    count = 1_000_000
    bomb = batch_around(empty_rows(count), count=count, codec=Codec.ZSTD)
    assert len(bomb) < 4 * MIB
    with pytest.raises(RecordsTooLargeError) as caught:
        check_batch(bomb)
    assert caught.value.code == "batch_too_large" and caught.value.limit == BATCH_RECORDS_MAX


def test_one_record_over_the_count_is_too_large() -> None:
    with pytest.raises(RecordsTooLargeError):
        check_batch(batch_around(empty_rows(BATCH_RECORDS_MAX + 1), count=BATCH_RECORDS_MAX + 1))


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_section_that_decompresses_past_the_bound_is_too_large_and_costs_little_memory(codec: Codec) -> None:
    bomb = encode_values([bytes(BATCH_RECORDS_BYTES_MAX + MIB)], codec=codec)
    assert len(bomb) < MIB
    tracemalloc.start()
    try:
        with pytest.raises(RecordsTooLargeError) as caught:
            check_batch(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.limit == BATCH_RECORDS_BYTES_MAX
    assert peak < 4 * MIB


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_section_just_under_the_bound_passes(codec: Codec) -> None:
    value = bytes(BATCH_RECORDS_BYTES_MAX - 64)
    assert check_batch(encode_values([value], codec=codec)).header.record_count == 1


def test_an_uncompressed_section_past_the_bound_is_too_large() -> None:
    section = msgpack.packb([[0, 0, None, bytes(BATCH_RECORDS_BYTES_MAX), []]], use_bin_type=True)
    with pytest.raises(RecordsTooLargeError):
        check_batch(batch_around(section, count=1))


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize(("section", "count"), [
    (msgpack.packb([[0, 0, None, b"v", []]] * 3, use_bin_type=True), 2),  # three records, header says two
    (msgpack.packb([[0, 0, None, b"v", []]], use_bin_type=True), 5),
    (msgpack.packb({"records": 1}), 1),
    (b"\xc1\xc1", 1),
    (b"", 1),
])
def test_a_section_that_is_not_the_array_its_header_says_is_invalid(codec: Codec, section: bytes,
                                                                      count: int) -> None:
    with pytest.raises(InvalidBatchError) as caught:
        check_batch(batch_around(section, count=count, codec=codec))
    assert caught.value.code == "invalid_batch"


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_section_that_is_not_valid_compressed_data_is_invalid(codec: Codec) -> None:
    forged = bytearray(batch_around(b"\x92\x01\x02 not compressed at all", count=2))
    struct.pack_into("<H", forged, 25, int(codec))
    struct.pack_into("<Q", forged, 17, xxhash.xxh3_64_intdigest(bytes(forged[25:])))
    with pytest.raises(InvalidBatchError) as caught:
        check_batch(bytes(forged))
    assert caught.value.code == "invalid_batch"


def test_a_flipped_byte_is_a_checksum_error_before_anything_is_decompressed() -> None:
    batch = bytearray(encode_values([b"x" * 100] * 10, codec=Codec.ZSTD))
    batch[-5] ^= 0x10
    with pytest.raises(CorruptBatchError):
        check_batch(bytes(batch))


@pytest.mark.parametrize(("flag", "what"), [(1 << 5, "control batch"), (1 << 6, "encrypted-at-rest flag"),
                                            (1 << 7, "Kafka's record format"), (2 | 1 << 7, "Kafka's record format")])
def test_a_client_batch_cannot_claim_what_only_the_broker_writes(flag: int, what: str) -> None:
    """Control batches (transaction markers, later), sealed batches and Kafka-format batches come
    from the broker alone: a produced batch that sets their attribute bit would be read as one (a
    msgpack section checked here would be read as Kafka records, unchecked)."""
    section = msgpack.packb([[0, 0, None, b"v", []]], use_bin_type=True)
    body = struct.pack("<HIqqqhiI", flag, 0, 0, 0, -1, -1, -1, 1)
    checksum = xxhash.xxh3_64_intdigest(body + section)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(section), 0)
    with pytest.raises(InvalidBatchError, match=what):
        check_batch(prefix + b"\x01" + struct.pack("<Q", checksum) + body + section)


def test_zstd_frames_without_a_content_size_are_bounded_too() -> None:
    compressor = zstandard.ZstdCompressor(write_content_size=False)
    packed = compressor.compress(msgpack.packb([[0, 0, None, bytes(BATCH_RECORDS_BYTES_MAX), []]], use_bin_type=True))
    body = struct.pack("<HIqqqhiI", int(Codec.ZSTD), 0, 0, 0, -1, -1, -1, 1)
    checksum = xxhash.xxh3_64_intdigest(body + packed)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(packed), 0)
    with pytest.raises(RecordsTooLargeError):
        check_batch(prefix + b"\x01" + struct.pack("<Q", checksum) + body + packed)


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("name", ["x-logbroker-queue", "X-LogBroker-Offset", "x-logbroker-"])
def test_a_header_named_like_the_brokers_own_is_refused(codec: Codec, name: str) -> None:
    """Decision 0173: the broker stamps ``x-logbroker-*`` on dead letters; no producer may."""
    filler = [ProducerRecord(b"v" * 1000) for _ in range(1500)]  # the name lands past the first MiB
    batch = encode_batch([*filler, ProducerRecord(b"v", None, [("ok", b"1"), (name, b"forged")])], codec=codec)
    with pytest.raises(InvalidBatchError, match="broker's own"):
        check_batch(batch)


@pytest.mark.parametrize("codec", list(Codec))
def test_the_prefix_in_a_value_or_a_longer_name_is_not_a_reserved_header(codec: Codec) -> None:
    batch = encode_batch([ProducerRecord(b"x-logbroker-queue", b"X-LOGBROKER-", [("my-x-logbroker-queue", b"x")])],
                         codec=codec)
    assert check_batch(batch).header.record_count == 1


def rows_batch(rows: list, *, codec: Codec = Codec.NONE, first_ts: int = 0, max_ts: int = 0,
               attributes: int = 0) -> bytes:
    """A checksummed batch around ``rows`` with the given header timestamps."""
    packed = compress(codec, msgpack.packb(rows, use_bin_type=True))
    count = len(rows)
    body = struct.pack("<HIqqqhiI", int(codec) | attributes, count - 1, first_ts, max_ts, -1, -1, -1, count)
    checksum = xxhash.xxh3_64_intdigest(body + packed)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(packed), 0)
    return prefix + b"\x01" + struct.pack("<Q", checksum) + body + packed


GOOD = [0, 0, None, b"v", []]


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize(("bad", "why"), [
    ([1, 0, 7, b"v", []], "an integer key"),
    ([1, 0, None, "text", []], "a str value"),
    ([0, 0, None, b"v", []], "offset deltas 0, 0"),
    ([2, 0, None, b"v", []], "offset deltas 0, 2"),
    ([1, 0.0, None, b"v", []], "a float timestamp delta"),
    ([1, False, None, b"v", []], "a bool timestamp delta"),
    ([1, 0, None, b"v"], "four fields"),
    ([1, 0, None, b"v", [], None], "six fields"),
    ([1, 0, None, b"v", [["h"]]], "a header without a value"),
    ([1, 0, None, b"v", [[b"h", b"x"]]], "a bytes header name"),
    ([1, 0, None, b"v", {"h": b"x"}], "headers as a map"),
])
def test_every_row_is_checked_as_readers_decode_it(codec: Codec, bad: list, why: str) -> None:
    """Decision 0220: a batch any reader would fail on is refused at produce."""
    assert check_batch(rows_batch([GOOD, [1, 0, None, b"v", []]], codec=codec)).header.record_count == 2
    with pytest.raises(InvalidBatchError) as caught:
        check_batch(rows_batch([GOOD, bad], codec=codec))
    assert caught.value.code == "invalid_batch", why


def test_timestamps_are_what_readers_and_retention_rely_on() -> None:
    checked = check_batch(rows_batch([[0, 5, None, b"a", []], [1, -3, None, b"b", []]], first_ts=100, max_ts=105))
    assert (checked.timestamp_min, checked.timestamp_max) == (97, 105)
    with pytest.raises(InvalidBatchError, match="max_timestamp"):  # the header must say the greatest
        check_batch(rows_batch([[0, 5, None, b"a", []]], first_ts=100, max_ts=100))
    with pytest.raises(InvalidBatchError, match="timestamps must lie"):  # past what clients hold (int64 sums)
        check_batch(rows_batch([[0, 1, None, b"a", []]], first_ts=2**62, max_ts=2**62 + 1))
    appended = check_batch(rows_batch([[0, 99, None, b"a", []]], first_ts=1, max_ts=7, attributes=1 << 3))
    assert (appended.timestamp_min, appended.timestamp_max) == (7, 7)  # log-append: the header's time


@pytest.mark.parametrize("codec", list(Codec))
def test_a_kelvin_sign_in_a_reserved_header_name_is_refused_too(codec: Codec) -> None:
    batch = encode_batch([ProducerRecord(b"v", None, [("x-logbro\u212aer-queue", b"forged")])], codec=codec)
    with pytest.raises(InvalidBatchError, match="broker's own"):
        check_batch(batch)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_a_compressed_section_over_the_kept_size_is_decompressed_again_and_checked(codec: Codec) -> None:
    values = [bytes([i % 251]) * 1000 for i in range(3000)]  # 3 MB decompressed, past KEPT_BYTES_MAX
    assert check_batch(encode_values(values, codec=codec)).header.record_count == 3000
    bad = rows_batch([*([i, 0, None, b"v" * 1000, []] for i in range(2999)), [2999, 0, 1, b"v", []]], codec=codec)
    with pytest.raises(InvalidBatchError):
        check_batch(bad)
