"""Kafka's records section (record batch magic 2) as the second stored record format (decision 0389).

A stored batch whose attributes carry ``KAFKA_RECORDS_FLAG`` (``segments.batch``) holds, after the
broker's own 65-byte header, the records section of the Kafka batch a Kafka producer sent, byte for
byte, compressed as it was sent (codec numbers are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
The Kafka listener then stores a batch without decoding it and serves it back by rebuilding Kafka's
61-byte header; every other reader decodes the section here into the same columns as the broker's
own msgpack section. Layout of one record (integers are zigzag LEB128 varints)::

    length varint (bytes after it), attributes int8 (unused: 0), timestamp_delta varlong,
    offset_delta varint, key_length varint (-1 = null), key, value_length varint (-1 = null), value,
    header_count varint, then per header: key_length varint, key (UTF-8), value_length varint
    (-1 = null), value

Kafka's 61-byte batch header is laid out here once (``KAFKA_HEADER``, its two halves around the CRC,
the named offsets and ``KafkaHeader``), for the Kafka listener's codec (``kafka_api``) as well.

Invariants:

- what is stored is read alike by every reader: Kafka's Java reader, librdkafka, aiokafka's compiled
  reader, the reference decoder here and the Java Spark reader. ``produced_facts``, the producer-side
  check, lets a section through only when it is canonical (byte for byte what aiokafka's writer
  makes of its records: shortest varints, -1 for null, attributes 0) or the reference decoder
  accepts it, which refuses what those readers read otherwise (an attributes byte other than 0, a
  length below -1, a varint longer than 5 or 10 bytes, a timestamp past int64);
- ``records`` (the reference decoder, pure Python) never trusts a length beyond the bytes present;
  it raises ``InvalidBatchError`` for anything but exactly ``count`` records with offset deltas
  ``0 .. count-1`` that fill the section, with UTF-8 header keys, at most
  ``HEADERS_PER_RECORD_MAX`` headers a record and ``HEADERS_PER_BATCH_MAX`` a batch;
- ``columns`` gives what ``records`` gives, faster: it walks the section with aiokafka's compiled
  reader when that is installed (on a copy of the section followed by zero padding, as that reader's
  varint reads check their first byte only) and falls back to ``records`` for anything that reader
  refuses or reads past int64;
- ``decompress`` takes one gzip member, one LZ4 frame of the kind Kafka's Java reader takes, one
  complete zstd frame (librdkafka reads only the first member of a gzip stream, Kafka's Java reader
  only the first LZ4 frame), or snappy raw or xerial-framed; nothing may follow; it never produces
  more than ``bytes_max`` bytes.

Pure functions over bytes: no files, no clock, no shared mutable state.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NamedTuple

import cramjam
import lz4.frame
import zstandard

from segments.errors import InvalidBatchError, RecordsTooLargeError

try:  # the compiled reader and sizer (aiokafka's Cython); the reference decoder stands in
    from aiokafka.record._crecords import DefaultRecordBatch as _CompiledBatch
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as _CompiledBuilder
except ImportError:  # pragma: no cover - aiokafka ships wheels for every platform the project runs on
    _CompiledBatch = _CompiledBuilder = None

CODEC_NONE: Final = 0
CODEC_GZIP: Final = 1
CODEC_SNAPPY: Final = 2
CODEC_LZ4: Final = 3
CODEC_ZSTD: Final = 4
CODECS: Final = frozenset({CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD})

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
VARINT_BITS: Final = 32
VARLONG_BITS: Final = 64
# attributes + five one-byte varints (timestamp delta, offset delta, key, value, header count)
RECORD_BODY_BYTES_MIN: Final = 6
RECORD_BYTES_MIN: Final = RECORD_BODY_BYTES_MIN + 1  # with its length varint
_RECORD_HEADER_BYTES_MIN: Final = 2  # key length and value length varints
# Headers one record, and one batch, may carry (librdkafka reads at most 100,000 per record): each
# costs a Python tuple (~140 bytes) in a reader for its two bytes on the wire.
HEADERS_PER_RECORD_MAX: Final = 10_000
HEADERS_PER_BATCH_MAX: Final = 100_000
# A record longer than this may hold more than HEADERS_PER_RECORD_MAX headers: its header count is
# read before the compiled reader builds them.
_RECORD_BYTES_UNCHECKED_MAX: Final = RECORD_BODY_BYTES_MIN + HEADERS_PER_RECORD_MAX * _RECORD_HEADER_BYTES_MIN
# A produced section larger than this is walked record by record before the compiled reader reads it.
FRAMING_CHECKED_BYTES_MIN: Final = 1 << 20

# Kafka's record batch v2 header (magic 2): 61 bytes, integers big-endian, the records section after it.
#
#     offset size field                   note
#     0      8    base_offset             int64
#     8      4    batch_length            int32, bytes after this field (at least 49)
#     12     4    partition_leader_epoch  int32
#     16     1    magic                   int8, 2
#     17     4    crc                     uint32, CRC32C of every byte from attributes to the batch's end
#     21     2    attributes              int16, bits 0-2 codec, 3 log-append time, 4 transactional,
#                                         5 control, 6 delete horizon
#     23     4    last_offset_delta       int32, record_count - 1
#     27     8    base_timestamp          int64, ms, the first record's timestamp
#     35     8    max_timestamp           int64, ms
#     43     8    producer_id             int64, -1 when not idempotent
#     51     2    producer_epoch          int16
#     53     4    base_sequence           int32
#     57     4    record_count            int32
#     61     -    records                 compressed as one stream when the codec is not 0
_KAFKA_FIELDS: Final = "qiibIhiqqqhii"  # one format letter per field above (and per field of KafkaHeader)
_KAFKA_CRC_FIELD: Final = 4  # the crc's place among them
KAFKA_MAGIC: Final = 2
KAFKA_HEADER: Final = struct.Struct(">" + _KAFKA_FIELDS)
# The header in two parts around the start of what the CRC covers, for a writer that computes the
# CRC of the second part and the records section before it packs the first.
KAFKA_HEADER_PREFIX: Final = struct.Struct(">" + _KAFKA_FIELDS[:_KAFKA_CRC_FIELD + 1])  # base_offset .. crc
KAFKA_HEADER_BODY: Final = struct.Struct(">" + _KAFKA_FIELDS[_KAFKA_CRC_FIELD + 1:])  # attributes .. record_count
KAFKA_CRC: Final = struct.Struct(">" + _KAFKA_FIELDS[_KAFKA_CRC_FIELD])
KAFKA_LOG_OVERHEAD: Final = struct.calcsize(">" + _KAFKA_FIELDS[:2])  # base_offset and batch_length
KAFKA_MAGIC_OFFSET: Final = struct.calcsize(">" + _KAFKA_FIELDS[:3])
KAFKA_CRC_OFFSET: Final = struct.calcsize(">" + _KAFKA_FIELDS[:_KAFKA_CRC_FIELD])
KAFKA_ATTRIBUTES_OFFSET: Final = KAFKA_HEADER_PREFIX.size  # the CRC covers from here to the batch's end
KAFKA_HEADER_BYTES: Final = KAFKA_HEADER.size
assert (KAFKA_LOG_OVERHEAD, KAFKA_MAGIC_OFFSET, KAFKA_CRC_OFFSET, KAFKA_ATTRIBUTES_OFFSET, KAFKA_HEADER_BYTES) == (
    12, 16, 17, 21, 61)
assert KAFKA_HEADER_PREFIX.size + KAFKA_HEADER_BODY.size == KAFKA_HEADER_BYTES
_KAFKA_LOG_APPEND_TIME: Final = 0x08
_PADDING: Final = bytes(16)  # more than the longest varint (10 bytes)

GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # gzip wrapper only, as Kafka's GZIPOutputStream writes
_DECOMPRESS_STEP_BYTES: Final = 256 * 1024  # output asked of lz4/zstd per call
_ZSTD_WINDOW_BYTES_MIN: Final = 8 * 1024 * 1024  # zstd level 19's window; Kafka's default level 3 uses 2 MiB
_ZSTD_WINDOW_BYTES_MAX: Final = 2**31  # zstd's own ceiling on 64-bit
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"  # snappy-java's block stream, as Kafka's Java producer writes
XERIAL_HEADER: Final = struct.Struct(">8sii")  # magic, version, minimum compatible version
XERIAL_BLOCK_LENGTH: Final = struct.Struct(">i")
assert XERIAL_HEADER.size == 16


class KafkaHeader(NamedTuple):
    """A batch header as ``KAFKA_HEADER`` unpacks it, field by field as laid out above."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


KafkaRow = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]
"""One decoded record: offset delta, absolute timestamp (ms), key, value, headers (values may be null)."""

PlainRow = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, bytes], ...]]
"""One record as readers take it: offset, timestamp (ms), key, value, headers (null values as empty bytes)."""

Columns = tuple[range, list[int], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], bool]
"""offsets, timestamps, keys, values, headers (per record: () or its (name, value bytes) pairs), has_headers."""


# ------------------------------------------------------------------------------------------------ columns


def columns(base_offset: int, count: int, first_timestamp: int, max_timestamp: int, log_append_time: bool,
            section: bytes | memoryview) -> Columns:
    """The records of a plain (decompressed) Kafka records section as columns, header values
    that Kafka sent as null given as empty bytes (the broker's headers are bytes)."""
    compiled = _compiled_columns(base_offset, count, first_timestamp, max_timestamp, log_append_time, section)
    if compiled is None:
        decoded = records(section, count, first_timestamp)
        stamps = [max_timestamp] * count if log_append_time else [row[1] for row in decoded]
        keys = tuple(row[2] for row in decoded)
        values = tuple(row[3] for row in decoded)
        headers: tuple[Any, ...] = tuple(row[4] for row in decoded)
    else:
        stamps, keys, values, headers = compiled
    has_headers = headers.count(()) != count
    if has_headers:
        headers = tuple(tuple((name, b"" if value is None else value) for name, value in pairs)
                        for pairs in headers)
    return range(base_offset, base_offset + count), stamps, keys, values, headers, has_headers


def _compiled_columns(base_offset: int, count: int, first_timestamp: int, max_timestamp: int,
                      log_append_time: bool, section: bytes | memoryview
                      ) -> tuple[list[int], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]] | None:
    """Timestamps, keys, values and headers by the compiled reader; None when it is not installed or
    refuses the section (the reference decoder then says why, or decodes it). One pass that keeps
    no per-record object the garbage collector tracks (an empty headers list is dropped with its
    record): keeping them made every young-generation collection walk the batch, at half the speed."""
    batch = _compiled_batch(base_offset, count, first_timestamp, max_timestamp, log_append_time, section)
    if batch is None:
        return None
    stamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[tuple[str, bytes | None], ...]] = []
    offset = base_offset
    try:
        for record in batch:  # bounded: the reader stops after ``count`` records
            if record.offset != offset:
                return None
            offset += 1
            stamps.append(record.timestamp)
            keys.append(record.key)
            values.append(record.value)
            pairs = record.headers
            headers.append(tuple(pairs) if pairs else ())
    except Exception:  # any refusal (corrupt, a huge length, bad UTF-8): the reference decoder decides
        return None
    if offset - base_offset != count or not _deltas_fit(stamps, first_timestamp):
        return None
    return stamps, tuple(keys), tuple(values), tuple(headers)


def iter_records(base_offset: int, count: int, first_timestamp: int, max_timestamp: int, log_append_time: bool,
                 section: bytes | memoryview, from_offset: int) -> Iterator[PlainRow]:
    """The records at or after ``from_offset`` one at a time, as (offset, timestamp, key, value,
    headers with null values as empty bytes): a reader that wants a few records of a large batch
    (a page of a JSON fetch) builds only those. The compiled reader skips the ones before without
    keeping them; what it refuses, the reference decoder reads from there (or raises for)."""
    index = 0
    batch = _compiled_batch(base_offset, count, first_timestamp, max_timestamp, log_append_time, section)
    if batch is not None:
        try:
            for record in batch:  # bounded: the reader stops after ``count`` records
                offset, timestamp = record.offset, record.timestamp
                if offset != base_offset + index or not INT64_MIN <= timestamp - first_timestamp <= INT64_MAX:
                    break
                index += 1
                if offset >= from_offset:
                    yield offset, timestamp, record.key, record.value, _plain_headers(record.headers)
            else:
                if index == count:
                    return
        except Exception:  # any refusal: the reference decoder reads on from ``index``
            pass
    rows = records(section, count, first_timestamp)
    for delta, timestamp, key, value, headers in rows[max(index, from_offset - base_offset, 0):]:
        yield (base_offset + delta, max_timestamp if log_append_time else timestamp, key, value,
               _plain_headers(headers))


def _plain_headers(pairs: Iterable[tuple[str, bytes | None]]) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, b"" if value is None else value) for name, value in pairs)


def _deltas_fit(stamps: list[int], base_timestamp: int) -> bool:
    """Whether every timestamp is ``base_timestamp`` plus an int64 delta: the compiled reader adds in
    int64 and wraps, so a sum past int64 shows here as a delta out of range."""
    return not stamps or (min(stamps) - base_timestamp >= INT64_MIN and max(stamps) - base_timestamp <= INT64_MAX)


def _compiled_batch(base_offset: int, count: int, first_timestamp: int, max_timestamp: int, log_append_time: bool,
                    section: bytes | memoryview) -> Any:
    """aiokafka's reader over a copy of ``section`` followed by zero padding, or None."""
    if _CompiledBatch is None or count <= 0:
        return None
    size = len(section)
    buffer = bytearray(KAFKA_HEADER_BYTES + size + len(_PADDING))
    try:
        KAFKA_HEADER.pack_into(buffer, 0, base_offset, KAFKA_HEADER_BYTES - KAFKA_LOG_OVERHEAD + size, 0, KAFKA_MAGIC,
                               0, _KAFKA_LOG_APPEND_TIME if log_append_time else 0, count - 1, first_timestamp,
                               max_timestamp, -1, -1, -1, count)
    except struct.error:
        return None
    buffer[KAFKA_HEADER_BYTES:KAFKA_HEADER_BYTES + size] = section
    return _CompiledBatch(memoryview(buffer)[:KAFKA_HEADER_BYTES + size])


def produced_facts(section: bytes | memoryview, count: int, base_timestamp: int
                   ) -> tuple[int, int, list[tuple[tuple[str, bytes | None], ...]]]:
    """What the broker checks of a produced section: the least and greatest record timestamp, and
    the header pairs of the records that carry some; ``InvalidBatchError`` for a section any reader
    would refuse or read otherwise.

    A section over ``FRAMING_CHECKED_BYTES_MIN`` is walked by ``check_framing`` first (record
    lengths, attributes bytes 0, header counts of long records), so that the compiled reader never
    builds more headers than the bounds allow; a smaller one holds at most half its size in headers
    (about 35 times its size in memory, briefly). Then the fast way: the compiled reader
    reads the records and aiokafka's writer encodes them again; a section equal to that encoding is
    canonical (shortest varints, -1 for null, attributes 0), which every reader, Kafka's Java one,
    librdkafka, aiokafka and the reference decoder, reads alike. Any other section is judged by the
    reference decoder, which refuses what Kafka's readers would read differently."""
    if len(section) > FRAMING_CHECKED_BYTES_MIN:
        check_framing(section, count)
    facts = _canonical_facts(section, count, base_timestamp)
    if facts is not None:
        return facts
    check_framing(section, count)
    rows = records(section, count, base_timestamp)
    stamps = [row[1] for row in rows]
    return min(stamps), max(stamps), [row[4] for row in rows if row[4]]


def _canonical_facts(section: bytes | memoryview, count: int, base_timestamp: int
                     ) -> tuple[int, int, list[tuple[tuple[str, bytes | None], ...]]] | None:
    batch = _compiled_batch(0, count, base_timestamp, base_timestamp, False, section)
    if batch is None:
        return None
    writer = _CompiledBuilder(magic=KAFKA_MAGIC, compression_type=0, is_transactional=0, producer_id=-1,
                              producer_epoch=-1, base_sequence=-1, batch_size=len(section) + KAFKA_HEADER_BYTES + 64)
    append = writer.append
    stamps: list[int] = []
    with_headers: list[tuple[tuple[str, bytes | None], ...]] = []
    offset = headers_total = 0
    try:
        for record in batch:  # bounded: the reader stops after ``count`` records
            if record.offset != offset:
                return None
            timestamp, headers = record.timestamp, record.headers
            if append(offset, timestamp, record.key, record.value, headers) is None:
                return None
            offset += 1
            stamps.append(timestamp)
            if headers:
                headers_total += len(headers)
                if headers_total > HEADERS_PER_BATCH_MAX or len(headers) > HEADERS_PER_RECORD_MAX:
                    return None  # the reference decoder says so
                with_headers.append(tuple(headers))
    except Exception:  # any refusal: the reference decoder decides
        return None
    if offset != count or not _deltas_fit(stamps, base_timestamp) or stamps[0] != base_timestamp:
        return None
    if writer.build()[KAFKA_HEADER_BYTES:] != section:  # a bytearray against the buffer: one memcmp
        return None
    return min(stamps), max(stamps), with_headers


# ------------------------------------------------------------------------------------------ reference decoder


def records(payload: bytes | memoryview, count: int, base_timestamp: int) -> list[KafkaRow]:
    """Decode exactly ``count`` records filling ``payload``; offset deltas must be 0..count-1."""
    payload = bytes(payload)
    payload_end = len(payload)
    if count > payload_end // RECORD_BYTES_MIN:
        raise InvalidBatchError(f"{count} records cannot fit, each needs at least {RECORD_BYTES_MIN} bytes")
    read_zigzag = _read_zigzag
    rows: list[KafkaRow] = []
    position = headers_total = 0
    for index in range(count):
        length, position = read_zigzag(payload, position, payload_end, VARINT_BITS)
        if length < RECORD_BODY_BYTES_MIN or length > payload_end - position:
            raise InvalidBatchError(
                f"record {index} at byte {position}: length {length}, {payload_end - position} bytes left")
        end = position + length
        if payload[position]:
            raise InvalidBatchError(f"record {index}: attributes byte {payload[position]:#x}; magic 2 records leave "
                                    "it 0 (librdkafka reads bit 3 as log-append time)")
        position += 1
        timestamp_delta, position = read_zigzag(payload, position, end, VARLONG_BITS)
        offset_delta, position = read_zigzag(payload, position, end, VARINT_BITS)
        if offset_delta != index:
            raise InvalidBatchError(f"record {index}: offset delta {offset_delta}, want {index} (in order, no gaps)")
        key, position = _read_bytes(payload, position, end, "key")
        value, position = _read_bytes(payload, position, end, "value")
        headers, position = _read_headers(payload, position, end)
        headers_total += len(headers)
        if headers_total > HEADERS_PER_BATCH_MAX:
            raise InvalidBatchError(f"more than {HEADERS_PER_BATCH_MAX} headers in one batch")
        if position != end:
            raise InvalidBatchError(f"record {index}: {end - position} bytes left over after its headers")
        timestamp = base_timestamp + timestamp_delta
        if not INT64_MIN <= timestamp <= INT64_MAX:
            raise InvalidBatchError(f"record {index}: timestamp {base_timestamp} + {timestamp_delta} overflows int64")
        rows.append((offset_delta, timestamp, key, value, headers))
    if position != payload_end:
        raise InvalidBatchError(f"{payload_end - position} bytes left over after {count} records")
    return rows


def check_framing(payload: bytes | memoryview, count: int) -> None:
    """Walk the records' length prefixes: each record fits, its attributes byte is 0 (aiokafka reads
    that field as a varint, Kafka as a byte, librdkafka takes its bit 3 for log-append time), and a
    record long enough to hold more than ``HEADERS_PER_RECORD_MAX`` headers holds at most that many
    (read here, before a reader builds them). ``records`` or ``columns`` checks the rest."""
    position = 0
    end = len(payload)
    for index in range(count):
        if position + 2 < end and payload[position + 1] < 0x80:  # a length of one or two bytes, inline
            first = payload[position]
            if first < 0x80:
                raw, position = first, position + 1
            else:
                raw, position = (first & 0x7F) | (payload[position + 1] << 7), position + 2
            length = (raw >> 1) ^ -(raw & 1)
        else:
            length, position = _read_zigzag(payload, position, end, VARINT_BITS)
        if length < RECORD_BODY_BYTES_MIN or length > end - position:
            raise InvalidBatchError(f"record {index} at byte {position}: length {length}, {end - position} bytes left")
        if payload[position]:
            raise InvalidBatchError(f"record {index}: attributes byte {payload[position]:#x}; magic 2 records "
                                    "leave it 0")
        if length > _RECORD_BYTES_UNCHECKED_MAX:
            _header_count(payload, position + 1, position + length, index)
        position += length


def _header_count(buf: bytes | memoryview, position: int, end: int, index: int) -> int:
    """The header count of the record whose body after the attributes byte is ``buf[position:end]``."""
    _, position = _read_zigzag(buf, position, end, VARLONG_BITS)  # timestamp delta
    _, position = _read_zigzag(buf, position, end, VARINT_BITS)  # offset delta
    for what in ("key", "value"):
        length, position = _read_zigzag(buf, position, end, VARINT_BITS)
        if length > end - position:
            raise InvalidBatchError(f"record {index}: {what} length {length}, {end - position} bytes left")
        position += max(length, 0)
    count, _ = _read_zigzag(buf, position, end, VARINT_BITS)
    if count > HEADERS_PER_RECORD_MAX:
        raise InvalidBatchError(f"record {index}: {count} headers, at most {HEADERS_PER_RECORD_MAX}")
    return count


def _read_zigzag(buf: bytes | memoryview, position: int, end: int, bits: int) -> tuple[int, int]:
    """Read a zigzag varint of at most ``bits`` bits from ``buf[position:end]``; returns it and the next position."""
    if position >= end:
        raise InvalidBatchError(f"varint at byte {position} starts past its frame's end {end}")
    byte = buf[position]
    if byte < 0x80:  # the common one-byte case
        return (byte >> 1) ^ -(byte & 1), position + 1
    start = position
    last = start + (bits + 6) // 7  # 5 bytes for int32, 10 for int64
    raw = byte & 0x7F
    shift = 7
    position += 1
    while True:  # bounded: at most 10 passes
        if position >= last:
            raise InvalidBatchError(f"varint at byte {start} is longer than {last - start} bytes")
        if position >= end:
            raise InvalidBatchError(f"varint at byte {start} runs past its frame's end {end}")
        byte = buf[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    if raw >> bits:
        raise InvalidBatchError(f"varint at byte {start} overflows int{bits}")
    return (raw >> 1) ^ -(raw & 1), position


def _read_bytes(buf: bytes, position: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, position = _read_zigzag(buf, position, end, VARINT_BITS)
    if length == -1:
        return None, position
    if length < -1 or length > end - position:  # below -1: Kafka's Java reader takes it for null, librdkafka fails
        raise InvalidBatchError(f"{what} at byte {position}: length {length}, "
                                f"{end - position} bytes left in the record")
    return buf[position : position + length], position + length


def _read_headers(buf: bytes, position: int, end: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, position = _read_zigzag(buf, position, end, VARINT_BITS)
    if count == 0:
        return (), position
    if count < 0 or count > (end - position) // _RECORD_HEADER_BYTES_MIN or count > HEADERS_PER_RECORD_MAX:
        raise InvalidBatchError(f"header count {count} at byte {position}, {end - position} bytes left in the record "
                                f"(at most {HEADERS_PER_RECORD_MAX})")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        key_length, position = _read_zigzag(buf, position, end, VARINT_BITS)
        if key_length < 0 or key_length > end - position:
            raise InvalidBatchError(f"header key at byte {position}: length {key_length}, {end - position} bytes left")
        try:
            key = buf[position : position + key_length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidBatchError(f"header key at byte {position} is not UTF-8: {exc.reason}") from None
        value, position = _read_bytes(buf, position + key_length, end, "header value")
        headers.append((key, value))
    return tuple(headers), position


# ------------------------------------------------------------------------------------------------ decompress


def decompress(codec: int, section: bytes | memoryview, bytes_max: int) -> bytes | memoryview:
    """The plain records section: ``section`` itself for codec 0, else decompressed to at most
    ``bytes_max`` bytes (``RecordsTooLargeError`` past it; ``InvalidBatchError`` when invalid)."""
    if codec == CODEC_NONE:
        return section
    if not section:
        raise InvalidBatchError("compressed records section is empty")
    try:
        function, name = _DECOMPRESSORS[codec]
    except KeyError:
        raise InvalidBatchError(f"unknown compression codec {codec}") from None
    try:
        return function(memoryview(section), bytes_max)
    except (RecordsTooLargeError, InvalidBatchError):
        raise
    except (zlib.error, RuntimeError, zstandard.ZstdError, ValueError) as exc:  # lz4: RuntimeError
        raise InvalidBatchError(f"{name}: {exc}") from None


def _too_big(bytes_max: int) -> RecordsTooLargeError:
    return RecordsTooLargeError(f"records section decompresses to more than the {bytes_max} bytes still allowed",
                                limit=bytes_max)


def _gunzip(section: memoryview, bytes_max: int) -> bytes:
    """One gzip member and nothing after it: librdkafka reads only the first member of a section,
    Kafka's Java reader every one."""
    inflater = zlib.decompressobj(wbits=GZIP_WBITS)
    out = inflater.decompress(section, bytes_max + 1)  # zlib grows its output gradually
    if len(out) > bytes_max:
        raise _too_big(bytes_max)
    if not inflater.eof:
        raise InvalidBatchError("gzip: the stream ends before its end marker")
    if inflater.unused_data:
        raise InvalidBatchError(f"gzip: {len(inflater.unused_data)} bytes follow the stream (one member only)")
    return out


_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"


def _unlz4(section: memoryview, bytes_max: int) -> bytes:
    """One LZ4 frame of the kind Kafka's Java reader takes (version 1, independent blocks, no
    dictionary, reserved bits 0) and nothing after it: that reader reads only the first frame."""
    if len(section) < 7 or bytes(section[:4]) != _LZ4_MAGIC:
        raise InvalidBatchError("lz4: not an LZ4 frame")
    flags, block = section[4], section[5]
    if flags >> 6 != 1 or not flags & 0x20 or flags & 0x03 or block & 0x8F or not 4 <= (block >> 4) & 0x07 <= 7:
        raise InvalidBatchError(f"lz4: frame descriptor {flags:#04x} {block:#04x}; Kafka's readers take version 1, "
                                "independent blocks, no dictionary, reserved bits 0")
    decompressor = lz4.frame.LZ4FrameDecompressor()
    chunks: list[bytes] = []
    produced = 0
    data_in: bytes | memoryview = section
    while True:  # bounded: each pass produces output until bytes_max is passed, or stops
        # lz4 allocates max_length up front, so ask for small steps.
        step = min(_DECOMPRESS_STEP_BYTES, bytes_max - produced + 1)
        chunk: bytes = decompressor.decompress(data_in, max_length=step)
        data_in = b""
        produced += len(chunk)
        if produced > bytes_max:
            raise _too_big(bytes_max)
        chunks.append(chunk)
        if decompressor.eof:
            break
        if decompressor.needs_input or not chunk:
            raise InvalidBatchError("lz4: the stream ends before its end mark")
    if decompressor.unused_data:
        raise InvalidBatchError(f"lz4: {len(decompressor.unused_data)} bytes follow the frame (one frame only)")
    return b"".join(chunks)


# Input per call: a 4-byte RLE block stands for 128 KiB, so one call makes at most 32 Ki times its
# input; fed at most bytes_max / 32 Ki (64 bytes at least), a bomb stops near twice bytes_max.
_ZSTD_FEED_BYTES_MIN: Final = 64
_ZSTD_FEED_BYTES_MAX: Final = 4096


def _unzstd(section: memoryview, bytes_max: int) -> bytes:
    """One complete zstd frame and nothing after it (librdkafka refuses a cut frame or trailing
    bytes), fed a little at a time so that a bomb stops near ``bytes_max``."""
    # A frame may ask for a window of up to 2 GiB, allocated before any output; cap it.
    window_max = min(max(_ZSTD_WINDOW_BYTES_MIN, 1 << max(bytes_max - 1, 1).bit_length()), _ZSTD_WINDOW_BYTES_MAX)
    decompressor = zstandard.ZstdDecompressor(max_window_size=window_max).decompressobj()
    chunks: list[bytes] = []
    produced = 0
    feed = min(max(_ZSTD_FEED_BYTES_MIN, bytes_max >> 15), _ZSTD_FEED_BYTES_MAX)
    for start in range(0, len(section), feed):  # bounded by the section's size
        chunk = decompressor.decompress(bytes(section[start:start + feed]))
        produced += len(chunk)
        if produced > bytes_max:
            raise _too_big(bytes_max)
        chunks.append(chunk)
        if decompressor.eof:
            if decompressor.unused_data or start + feed < len(section):
                raise InvalidBatchError("zstd: bytes follow the frame (one frame only)")
            return b"".join(chunks)
    raise InvalidBatchError("zstd: the stream ends before its frame does")


def _unsnappy(section: memoryview, bytes_max: int) -> bytes:
    """Xerial-framed snappy (Kafka's Java client) or one raw snappy block (librdkafka)."""
    if bytes(section[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _unsnappy_block(section, bytes_max)
    if len(section) < XERIAL_HEADER.size:
        raise InvalidBatchError(f"snappy: xerial header truncated to {len(section)} bytes")
    chunks: list[bytes] = []
    produced = 0
    position = XERIAL_HEADER.size
    while position < len(section):  # bounded: each pass advances by at least the block length field
        if len(section) - position < XERIAL_BLOCK_LENGTH.size:
            raise InvalidBatchError(f"snappy: xerial block length at byte {position} is truncated")
        (block_bytes,) = XERIAL_BLOCK_LENGTH.unpack_from(section, position)
        position += XERIAL_BLOCK_LENGTH.size
        if block_bytes < 0 or block_bytes > len(section) - position:
            raise InvalidBatchError(f"snappy: xerial block at byte {position}: length {block_bytes}, "
                                    f"{len(section) - position} bytes left")
        chunk = _unsnappy_block(section[position : position + block_bytes], bytes_max - produced)
        produced += len(chunk)
        chunks.append(chunk)
        position += block_bytes
    return b"".join(chunks)


def _unsnappy_block(block: memoryview, bytes_max: int) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(block)  # the block's preamble, read before any allocation
        if declared > bytes_max:
            raise _too_big(bytes_max)
        output = bytearray(declared)
        written = cramjam.snappy.decompress_raw_into(block, output)
    except cramjam.DecompressionError as exc:
        raise InvalidBatchError(f"snappy: {exc}") from None
    if written != declared:
        raise InvalidBatchError(f"snappy: block declares {declared} bytes, decompresses to {written}")
    return bytes(output)


_DECOMPRESSORS: Final[dict[int, tuple[Callable[[memoryview, int], bytes], str]]] = {
    CODEC_GZIP: (_gunzip, "gzip"),
    CODEC_SNAPPY: (_unsnappy, "snappy"),
    CODEC_LZ4: (_unlz4, "lz4"),
    CODEC_ZSTD: (_unzstd, "zstd"),
}
