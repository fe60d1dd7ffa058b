"""Kafka's records section (record batch magic 2) as the second stored record format (decision 0389).

A stored batch whose attributes carry ``KAFKA_RECORDS_FLAG`` (``segments.batch``) holds, after the
broker's own 65-byte header, the records section of the Kafka batch a Kafka producer sent, byte for
byte, compressed as it was sent (codec numbers are Kafka's: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
The Kafka listener then stores a batch without decoding it and serves it back by rebuilding Kafka's
61-byte header; every other reader decodes the section here into the same columns as the broker's
own msgpack section. Layout of one record (integers are zigzag LEB128 varints)::

    length varint (bytes after it), attributes int8 (unused), timestamp_delta varlong,
    offset_delta varint, key_length varint (-1 = null), key, value_length varint (-1 = null), value,
    header_count varint, then per header: key_length varint, key (UTF-8), value_length varint
    (-1 = null), value

Invariants:

- ``records`` (the reference decoder, pure Python) never trusts a length beyond the bytes present and
  raises ``InvalidBatchError`` for anything but exactly ``count`` records with offset deltas
  ``0 .. count-1`` that fill the section, UTF-8 header keys and int64 timestamps; it reads as Kafka's
  Java reader does (any negative key or value length is null; varints at most 5 or 10 bytes);
- ``columns`` gives what ``records`` gives, faster: it walks the section with aiokafka's compiled
  reader when that is installed (a copy of the section with zero padding after it, so that reader's
  varint reads, which check their first byte only, never leave the buffer) and falls back to
  ``records`` for anything that reader refuses, so the reference decoder always has the last word;
- the two agree on every section ``check_attributes`` accepts: aiokafka reads a record's attributes
  as a varint, Kafka as one byte, which differ only for a byte of 0x80 or more (Kafka writes 0);
  ``produced_facts``, the producer-side check, lets through only sections both read alike;
- ``decompress`` reads every member or frame of the section (as Kafka's Java reader does), refuses
  bytes after the last one, and never produces more than ``bytes_max`` bytes.

Pure functions over bytes: no files, no clock, no shared mutable state.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any, Final

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

# The Kafka batch header the compiled reader is handed (codec 0: the section given is plain).
_KAFKA_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_KAFKA_LOG_OVERHEAD: Final = 12
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

KafkaRow = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]
"""One decoded record: offset delta, absolute timestamp (ms), key, value, headers (values may be null)."""

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
    if offset - base_offset != count:
        return None
    return stamps, tuple(keys), tuple(values), tuple(headers)


def _compiled_batch(base_offset: int, count: int, first_timestamp: int, max_timestamp: int, log_append_time: bool,
                    section: bytes | memoryview) -> Any:
    """aiokafka's reader over a copy of ``section`` followed by zero padding, or None."""
    if _CompiledBatch is None or count <= 0:
        return None
    size = len(section)
    buffer = bytearray(_KAFKA_HEADER.size + size + len(_PADDING))
    try:
        _KAFKA_HEADER.pack_into(buffer, 0, base_offset, _KAFKA_HEADER.size - _KAFKA_LOG_OVERHEAD + size, 0, 2, 0,
                                _KAFKA_LOG_APPEND_TIME if log_append_time else 0, count - 1, first_timestamp,
                                max_timestamp, -1, -1, -1, count)
    except struct.error:
        return None
    buffer[_KAFKA_HEADER.size:_KAFKA_HEADER.size + size] = section
    return _CompiledBatch(memoryview(buffer)[:_KAFKA_HEADER.size + size])


def produced_facts(section: bytes | memoryview, count: int, base_timestamp: int
                   ) -> tuple[int, int, list[tuple[tuple[str, bytes | None], ...]]]:
    """What the broker checks of a produced section: the least and greatest record timestamp, and
    the header pairs of the records that carry some; ``InvalidBatchError`` for a section the
    reference decoder refuses, or whose records' attributes bytes are 0x80 or more.

    The compiled reader looks at each record once without keeping it (a quarter of what decoding
    into columns costs) and the records' sizes are summed as Kafka's writers encode them (shortest
    varints, a one-byte attributes field): a section of exactly that size is canonical, which every
    reader, Kafka's and aiokafka's, reads alike. Any other section (odd but valid, or invalid) is
    judged by ``check_attributes`` and the reference decoder."""
    facts = _canonical_facts(section, count, base_timestamp)
    if facts is not None:
        return facts
    check_attributes(section, count)
    rows = records(section, count, base_timestamp)
    stamps = [row[1] for row in rows]
    return min(stamps), max(stamps), [row[4] for row in rows if row[4]]


def _canonical_facts(section: bytes | memoryview, count: int, base_timestamp: int
                     ) -> tuple[int, int, list[tuple[tuple[str, bytes | None], ...]]] | None:
    batch = _compiled_batch(0, count, base_timestamp, base_timestamp, False, section)
    if batch is None or base_timestamp == -1:  # -1: aiokafka's builder takes it for "no first record yet"
        return None
    sizer = _CompiledBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1,
                             base_sequence=-1, batch_size=0)
    sizer.append(0, timestamp=base_timestamp, key=None, value=None, headers=[])  # deltas from base_timestamp
    size_of = sizer.size_in_bytes
    stamps: list[int] = []
    with_headers: list[tuple[tuple[str, bytes | None], ...]] = []
    offset = size = 0
    try:
        for record in batch:  # bounded: the reader stops after ``count`` records
            if record.offset != offset:
                return None
            timestamp, headers = record.timestamp, record.headers
            size += size_of(offset, timestamp, record.key, record.value, headers)
            offset += 1
            stamps.append(timestamp)
            if headers:
                with_headers.append(tuple(headers))
    except Exception:  # any refusal: the reference decoder decides
        return None
    if offset != count or size != len(section):
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
    position = 0
    for index in range(count):
        length, position = read_zigzag(payload, position, payload_end, VARINT_BITS)
        if length < RECORD_BODY_BYTES_MIN or length > payload_end - position:
            raise InvalidBatchError(
                f"record {index} at byte {position}: length {length}, {payload_end - position} bytes left")
        end = position + length
        position += 1  # attributes: unused in magic 2
        timestamp_delta, position = read_zigzag(payload, position, end, VARLONG_BITS)
        offset_delta, position = read_zigzag(payload, position, end, VARINT_BITS)
        if offset_delta != index:
            raise InvalidBatchError(f"record {index}: offset delta {offset_delta}, want {index} (in order, no gaps)")
        key, position = _read_bytes(payload, position, end, "key")
        value, position = _read_bytes(payload, position, end, "value")
        headers, position = _read_headers(payload, position, end)
        if position != end:
            raise InvalidBatchError(f"record {index}: {end - position} bytes left over after its headers")
        timestamp = base_timestamp + timestamp_delta
        if not INT64_MIN <= timestamp <= INT64_MAX:
            raise InvalidBatchError(f"record {index}: timestamp {base_timestamp} + {timestamp_delta} overflows int64")
        rows.append((offset_delta, timestamp, key, value, headers))
    if position != payload_end:
        raise InvalidBatchError(f"{payload_end - position} bytes left over after {count} records")
    return rows


def check_attributes(payload: bytes | memoryview, count: int) -> None:
    """Refuse a section in which a record's attributes byte is 0x80 or more (unused in magic 2; Kafka
    clients write 0): there aiokafka's reader and Kafka's would read different records. Walks the
    records' length prefixes only; ``records`` or ``columns`` checks the rest."""
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
        if payload[position] >= 0x80:
            raise InvalidBatchError(f"record {index}: attributes byte {payload[position]:#x}; magic 2 records "
                                    "leave it unused (0)")
        position += length


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
    if length < 0:  # Kafka writes -1; its reader, and aiokafka's, take any negative length for null
        return None, position
    if length > end - position:
        raise InvalidBatchError(f"{what} at byte {position}: length {length}, "
                                f"{end - position} bytes left in the record")
    return buf[position : position + length], position + length


def _read_headers(buf: bytes, position: int, end: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, position = _read_zigzag(buf, position, end, VARINT_BITS)
    if count == 0:
        return (), position
    if count < 0 or count > (end - position) // _RECORD_HEADER_BYTES_MIN:
        raise InvalidBatchError(f"header count {count} at byte {position}, {end - position} bytes left in the record")
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
    chunks: list[bytes] = []
    produced = 0
    pending: bytes | memoryview = section
    while pending:  # one pass per gzip member (Java's GZIPInputStream reads concatenated members)
        inflater = zlib.decompressobj(wbits=GZIP_WBITS)
        chunk = inflater.decompress(pending, bytes_max - produced + 1)  # zlib grows its output gradually
        produced += len(chunk)
        if produced > bytes_max:
            raise _too_big(bytes_max)
        if not inflater.eof:
            raise InvalidBatchError("gzip: stream ends before its end marker")
        chunks.append(chunk)
        pending = inflater.unused_data
    return b"".join(chunks)


def _unlz4(section: memoryview, bytes_max: int) -> bytes:
    chunks: list[bytes] = []
    produced = 0
    pending: bytes | memoryview = section
    while pending:  # one pass per LZ4 frame
        decompressor = lz4.frame.LZ4FrameDecompressor()
        data_in = pending
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
                raise InvalidBatchError("lz4: stream ends before its end mark")
        pending = decompressor.unused_data
    return b"".join(chunks)


def _unzstd(section: memoryview, bytes_max: int) -> bytes:
    # A frame may ask for a window of up to 2 GiB, allocated before any output; cap it.
    window_max = min(max(_ZSTD_WINDOW_BYTES_MIN, 1 << max(bytes_max - 1, 1).bit_length()), _ZSTD_WINDOW_BYTES_MAX)
    decompressor = zstandard.ZstdDecompressor(max_window_size=window_max)
    chunks: list[bytes] = []
    produced = 0
    # A stream cut short yields a prefix of its output here; the records then fail to fill the section.
    with decompressor.stream_reader(section, read_across_frames=True, closefd=False) as reader:
        while True:  # bounded: each pass adds output until bytes_max is passed, or stops
            chunk = reader.read(min(_DECOMPRESS_STEP_BYTES, bytes_max - produced + 1))
            if not chunk:
                break
            produced += len(chunk)
            if produced > bytes_max:
                raise _too_big(bytes_max)
            chunks.append(chunk)
    return b"".join(chunks)


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
