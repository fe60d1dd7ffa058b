"""Apache Kafka record batch v2 (magic 2) codec: Kafka batches built and read whole.

Why: Fetch converts batches stored in the broker's own record format into Kafka batches here
(``encode_batch``), Produce checks a Kafka batch's header here (``checked_header``; its records
section is judged by ``segments.kafka_records``, whose reference decoder ``decode_batches`` uses), and
``decode_batches`` reads whole Kafka batches for tests and tools as Kafka's ``DefaultRecordBatch``
does. Layout (integers big-endian)::

    offset size field                   note
    0      8    base_offset             int64
    8      4    batch_length            int32, bytes after this field (at least 49)
    12     4    partition_leader_epoch  int32
    16     1    magic                   int8, 2
    17     4    crc                     uint32, CRC32C of every byte from attributes to the batch's end
    21     2    attributes              int16, bits 0-2 codec, 3 log-append time, 4 transactional,
                                        5 control, 6 delete horizon
    23     4    last_offset_delta       int32, record_count - 1
    27     8    base_timestamp          int64, ms, the first record's timestamp
    35     8    max_timestamp           int64, ms
    43     8    producer_id             int64, -1 when not idempotent
    51     2    producer_epoch          int16
    53     4    base_sequence           int32
    57     4    record_count            int32
    61     -    records                 compressed as one stream when the codec is not 0

    Record: length varint (bytes after it), attributes int8 (unused), timestamp_delta varlong,
    offset_delta varint, key_length varint (-1 = null), key, value_length varint (-1 = null), value,
    header_count varint, then per header: key_length varint, key (UTF-8), value_length varint (-1 = null),
    value. Varints are zigzag LEB128: at most 5 bytes (int32) or 10 bytes (varlong, int64).

Invariants kept by ``decode_batches``:

- it never trusts a length beyond the bytes present: each length or count is checked against the bytes
  left in its frame (data, batch, records section, record) before it is used or looped over;
- the records decoded in one call are at most ``records_max`` and the decompressed bytes at most
  ``uncompressed_bytes_max``; decompression is streamed with a bounded output, so a compression bomb
  costs about ``uncompressed_bytes_max`` of memory, never its expanded size (plus codec state: a zstd
  window of at most max(8 MiB, ``uncompressed_bytes_max``), LZ4 blocks of at most 4 MiB);
- a batch it returns passed its CRC, has magic 2, offset deltas 0..n-1 in order with
  ``last_offset_delta == n - 1``, records that end exactly at the batch's end, UTF-8 header keys and
  timestamps within int64; anything else raises ``RecordBatchError`` naming the batch's position
  and what is wrong, and no other exception escapes for any input bytes.

Not supported on decode: transactional and control batches (``UnsupportedBatch``) and codecs other
than 0-4 (``UnsupportedCompression``). ``max_timestamp`` is returned as written, not checked: Kafka
brokers recompute it too. Pure functions: no I/O, no clock, no shared mutable state; thread-safe.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

import cramjam
import crc32c
import lz4.frame
import zstandard

from segments import kafka_records
from segments.errors import InvalidBatchError

MAGIC: Final = 2
COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
COMPRESSION_SNAPPY: Final = 2
COMPRESSION_LZ4: Final = 3
COMPRESSION_ZSTD: Final = 4
NO_TIMESTAMP: Final = -1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")  # the batch header, one format letter per field above
_LOG_OVERHEAD: Final = struct.calcsize(">qi")  # base_offset and batch_length, outside batch_length
_MAGIC_OFFSET: Final = struct.calcsize(">qii")
_CRC_OFFSET: Final = _MAGIC_OFFSET + 1
_CRC: Final = struct.Struct(">I")
_ATTRIBUTES_OFFSET: Final = _CRC_OFFSET + _CRC.size  # the CRC covers from here to the batch's end
_HEADER_BYTES: Final = _HEADER.size
_BATCH_LENGTH_MIN: Final = _HEADER_BYTES - _LOG_OVERHEAD
assert (_MAGIC_OFFSET, _CRC_OFFSET, _ATTRIBUTES_OFFSET, _HEADER_BYTES) == (16, 17, 21, 61)

_CODEC_MASK: Final = 0x07
_LOG_APPEND_TIME_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20
_DELETE_HORIZON_BIT: Final = 0x40

_INT32_MAX: Final = 2**31 - 1
_INT64_MIN: Final = kafka_records.INT64_MIN
_INT64_MAX: Final = kafka_records.INT64_MAX
_GZIP_WBITS: Final = kafka_records.GZIP_WBITS
_GZIP_LEVEL: Final = 6  # java.util.zip's default, as Kafka's producer uses
_ZSTD_LEVEL: Final = 3  # Kafka's default compression.zstd.level
_XERIAL_VERSION: Final = 1
_XERIAL_BLOCK_BYTES: Final = 32 * 1024  # snappy-java's default uncompressed block size


class RecordBatchError(ValueError):
    """The bytes are not a valid record batch; the message says where and what is wrong."""


class UnsupportedCompression(RecordBatchError):
    """The batch names a compression codec this module cannot decode."""

    def __init__(self, codec: int, message: str = "") -> None:
        super().__init__(message or f"unsupported compression codec {codec}")
        self.codec = codec


class UnsupportedBatch(RecordBatchError):
    """A well-formed batch of a kind not accepted yet: transactional, control or with a delete horizon."""


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    offset_delta: int
    timestamp_ms: int  # absolute: base_timestamp + the record's delta
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[KafkaRecord, ...]

    @property
    def compression(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & _LOG_APPEND_TIME_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


class KafkaHeader(NamedTuple):
    """The 61-byte header of a record batch, field by field as laid out above."""

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


class _Allowance:
    """What one ``decode_batches`` call may still produce."""

    __slots__ = ("bytes_left", "records_left")

    def __init__(self, records_left: int, bytes_left: int) -> None:
        self.records_left = records_left
        self.bytes_left = bytes_left


# ---------------------------------------------------------------------------------------------------------- decode


def decode_batches(
    data: bytes | bytearray | memoryview, *, records_max: int, uncompressed_bytes_max: int
) -> list[KafkaBatch]:
    """Decode the whole batches back to back in ``data`` (a Produce partition's ``records``).

    ``records_max`` bounds the records over all batches; ``uncompressed_bytes_max`` bounds the bytes
    produced by decompression over all batches (uncompressed batches are already in memory and do not
    count). Raises ``RecordBatchError`` (or a subclass) for anything invalid, including a partial batch.
    """
    assert records_max >= 0 and uncompressed_bytes_max >= 0, (records_max, uncompressed_bytes_max)
    allowance = _Allowance(records_max, uncompressed_bytes_max)
    batches: list[KafkaBatch] = []
    with memoryview(data) as raw, raw.cast("B") as view:
        position = 0
        while position < len(view):  # bounded: each pass advances by at least one batch header
            batch, batch_bytes = _decode_batch(view, position, allowance)
            batches.append(batch)
            position += batch_bytes
    return batches


def checked_header(view: memoryview, position: int) -> tuple[KafkaHeader, int]:
    """The header of the whole batch at ``position``, its CRC and attributes checked, and the
    batch's size in bytes; ``RecordBatchError`` for a truncated or invalid one."""
    present = len(view) - position
    where = f"batch at position {position}"
    if present <= _MAGIC_OFFSET:
        raise RecordBatchError(f"{where}: truncated, {present} bytes present, the header needs {_HEADER_BYTES}")
    magic = view[position + _MAGIC_OFFSET]
    if magic != MAGIC:
        raise RecordBatchError(f"{where}: magic {magic}, only magic {MAGIC} is supported (Produce v3+)")
    if present < _HEADER_BYTES:
        raise RecordBatchError(f"{where}: truncated, {present} bytes present, the header needs {_HEADER_BYTES}")
    header = KafkaHeader._make(_HEADER.unpack_from(view, position))
    if header.batch_length < _BATCH_LENGTH_MIN:
        raise RecordBatchError(f"{where}: batch_length {header.batch_length} is below the minimum {_BATCH_LENGTH_MIN}")
    batch_bytes = _LOG_OVERHEAD + header.batch_length
    if batch_bytes > present:
        raise RecordBatchError(f"{where}: truncated, batch_length says {batch_bytes} bytes, {present} present")
    crc_computed = crc32c.crc32c(view[position + _ATTRIBUTES_OFFSET : position + batch_bytes])
    if crc_computed != header.crc:
        raise RecordBatchError(f"{where}: CRC mismatch, stored {header.crc:#010x}, computed {crc_computed:#010x}")
    _check_attributes(header.attributes, where)
    return header, batch_bytes


def _decode_batch(view: memoryview, position: int, allowance: _Allowance) -> tuple[KafkaBatch, int]:
    """Decode the batch at ``position``; returns it and its size in bytes."""
    where = f"batch at position {position}"
    header, batch_bytes = checked_header(view, position)
    (base_offset, _, leader_epoch, _, _, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, count) = header
    end = position + batch_bytes
    _check_count(count, last_offset_delta, allowance, where)
    section = view[position + _HEADER_BYTES : end]
    codec = attributes & _CODEC_MASK
    payload = bytes(section) if codec == COMPRESSION_NONE else _decompress(codec, section, allowance, where)
    try:
        records = tuple(KafkaRecord(*row) for row in kafka_records.records(payload, count, base_timestamp))
    except InvalidBatchError as exc:
        raise RecordBatchError(f"{where}, records section ({len(payload)} bytes): {exc}") from None
    allowance.records_left -= count
    batch = KafkaBatch(base_offset, leader_epoch, attributes, last_offset_delta, base_timestamp, max_timestamp,
                       producer_id, producer_epoch, base_sequence, records)  # fmt: skip
    return batch, batch_bytes


def _check_attributes(attributes: int, where: str) -> None:
    if attributes & _TRANSACTIONAL_BIT:
        raise UnsupportedBatch(f"{where}: transactional batches are not supported yet")
    if attributes & _CONTROL_BIT:
        raise UnsupportedBatch(f"{where}: control batches are not supported")
    if attributes & _DELETE_HORIZON_BIT:
        raise UnsupportedBatch(f"{where}: a delete horizon is only written by log compaction")
    codec = attributes & _CODEC_MASK
    if codec > COMPRESSION_ZSTD:
        raise UnsupportedCompression(codec, f"{where}: unsupported compression codec {codec}")


def _check_count(count: int, last_offset_delta: int, allowance: _Allowance, where: str) -> None:
    if count < 0:
        raise RecordBatchError(f"{where}: negative record count {count}")
    if last_offset_delta != count - 1:
        raise RecordBatchError(f"{where}: last_offset_delta {last_offset_delta} with {count} records, want {count - 1}")
    if count > allowance.records_left:
        raise RecordBatchError(f"{where}: {count} records exceed the {allowance.records_left} still allowed")


# ---------------------------------------------------------------------------------------------------- decompress


def _decompress(codec: int, section: memoryview, allowance: _Allowance, where: str) -> bytes:
    """Decompress a records section, producing at most ``allowance.bytes_left`` bytes, and charge it."""
    try:
        payload = bytes(kafka_records.decompress(codec, section, allowance.bytes_left))
    except InvalidBatchError as exc:  # RecordsTooLargeError too
        raise RecordBatchError(f"{where}: {exc}") from None
    assert len(payload) <= allowance.bytes_left, (len(payload), allowance.bytes_left)
    allowance.bytes_left -= len(payload)
    return payload


# ---------------------------------------------------------------------------------------------------------- encode


def encode_batch(
    base_offset: int,
    records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = COMPRESSION_NONE,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Build one magic-2 batch of ``(timestamp_ms, key, value, headers)`` records, with create-time timestamps.

    Offset deltas are 0..n-1 unless ``offset_deltas`` gives them (strictly increasing, as a fetch after
    compaction may need); ``last_offset_delta`` is the last of them, -1 for no records. Raises
    ``ValueError`` for arguments that cannot be encoded (a field or timestamp delta out of range).
    """
    if compression != COMPRESSION_NONE and compression not in _COMPRESSORS:
        raise ValueError(f"unknown compression codec {compression}")
    count = len(records)
    deltas: Sequence[int] = range(count) if offset_deltas is None else _checked_deltas(offset_deltas, count)
    base_timestamp = records[0][0] if count else NO_TIMESTAMP
    max_timestamp = max(record[0] for record in records) if count else NO_TIMESTAMP
    plain = _encode_records(records, deltas, base_timestamp)
    section = plain if compression == COMPRESSION_NONE else _COMPRESSORS[compression](plain)
    out = bytearray(_HEADER_BYTES)
    out += section
    batch_length = len(out) - _LOG_OVERHEAD
    if batch_length > _INT32_MAX:
        raise ValueError(f"batch of {len(out)} bytes exceeds int32")
    last_offset_delta = deltas[-1] if count else -1
    try:
        _HEADER.pack_into(out, 0, base_offset, batch_length, partition_leader_epoch, MAGIC, 0, compression,
                          last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                          base_sequence, count)  # fmt: skip
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from None
    with memoryview(out) as view:
        crc = crc32c.crc32c(view[_ATTRIBUTES_OFFSET:])
    _CRC.pack_into(out, _CRC_OFFSET, crc)
    return bytes(out)


def _checked_deltas(offset_deltas: Sequence[int], count: int) -> Sequence[int]:
    if len(offset_deltas) != count:
        raise ValueError(f"{len(offset_deltas)} offset deltas for {count} records")
    previous = -1
    for delta in offset_deltas:
        if not previous < delta <= _INT32_MAX:
            raise ValueError(f"offset delta {delta} after {previous}: want strictly increasing, 0..{_INT32_MAX}")
        previous = delta
    return offset_deltas


def _encode_records(
    records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    offset_deltas: Sequence[int],
    base_timestamp: int,
) -> bytearray:
    out = bytearray()
    put = _put_zigzag
    for (timestamp, key, value, headers), offset_delta in zip(records, offset_deltas, strict=True):
        timestamp_delta = timestamp - base_timestamp
        if not (_INT64_MIN <= timestamp <= _INT64_MAX and _INT64_MIN <= timestamp_delta <= _INT64_MAX):
            raise ValueError(f"timestamp {timestamp} out of int64, or too far from the first {base_timestamp}")
        body = bytearray(b"\x00")  # attributes: unused in magic 2
        put(body, timestamp_delta)
        put(body, offset_delta)
        if key is None:
            body.append(1)  # zigzag(-1)
        else:
            put(body, len(key))
            body += key
        if value is None:
            body.append(1)
        else:
            put(body, len(value))
            body += value
        put(body, len(headers))
        for name, header_value in headers:
            name_bytes = name.encode("utf-8")
            put(body, len(name_bytes))
            body += name_bytes
            if header_value is None:
                body.append(1)
            else:
                put(body, len(header_value))
                body += header_value
        put(out, len(body))
        out += body
    return out


def _put_zigzag(out: bytearray, value: int) -> None:
    """Append ``value`` (int64) as a zigzag varint."""
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag >= 0x80:  # bounded: at most 10 passes for an int64
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _gzip(section: bytearray) -> bytes:
    deflater = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
    return deflater.compress(section) + deflater.flush()


def _snappy(section: bytearray) -> bytes:
    out = bytearray(kafka_records.XERIAL_HEADER.pack(kafka_records.XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION))
    with memoryview(section) as view:
        # At least one block: a bare header is taken for raw snappy by some readers (kafka-python).
        for start in range(0, max(len(section), 1), _XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
            out += kafka_records.XERIAL_BLOCK_LENGTH.pack(len(block))
            out += block
    return bytes(out)


def _lz4(section: bytearray) -> bytes:
    # Kafka's Java reader needs independent blocks; it writes no content size, nor do we.
    compressed: bytes = lz4.frame.compress(bytes(section), block_linked=False, store_size=False)
    return compressed


def _zstd(section: bytearray) -> bytes:
    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(section)


_COMPRESSORS: Final[dict[int, Callable[[bytearray], bytes]]] = {
    COMPRESSION_GZIP: _gzip,
    COMPRESSION_SNAPPY: _snappy,
    COMPRESSION_LZ4: _lz4,
    COMPRESSION_ZSTD: _zstd,
}
