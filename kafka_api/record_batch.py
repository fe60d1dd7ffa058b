"""Apache Kafka record batch v2 (magic 2) codec: Kafka batches built and checked.

Why: Fetch converts batches stored in the broker's own record format into Kafka batches here
(``encode_batch``), and Produce checks a Kafka batch's header here (``checked_header``; its records
section is judged by ``segments.kafka_records``). The layouts, of the 61-byte header
(``KAFKA_HEADER``) and of a record, are given in ``segments.kafka_records``.

``checked_header`` never trusts a length beyond the bytes present, and refuses (``RecordBatchError``,
naming the batch's position and what is wrong) a truncated batch, a magic other than 2, a
``batch_length`` below the header's, a CRC mismatch, transactional and control batches and a delete
horizon (``UnsupportedBatch``), and codecs other than 0-4 (``UnsupportedCompression``). Whole batches
are decoded, records included, only by the tests' reference decoder (``tests.support.kafka_decoder``):
the broker stores a Kafka batch's records section as it came and gives it back unchanged. Pure
functions: no I/O, no clock, no shared mutable state; thread-safe.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Final

import cramjam
import crc32c
import lz4.frame
import zstandard

from segments import kafka_records
from segments.kafka_records import (
    KAFKA_ATTRIBUTES_OFFSET,
    KAFKA_CRC,
    KAFKA_CRC_OFFSET,
    KAFKA_HEADER,
    KAFKA_HEADER_BYTES,
    KAFKA_LOG_OVERHEAD,
    KAFKA_MAGIC_OFFSET,
    KafkaHeader,
)

MAGIC: Final = kafka_records.KAFKA_MAGIC
COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
COMPRESSION_SNAPPY: Final = 2
COMPRESSION_LZ4: Final = 3
COMPRESSION_ZSTD: Final = 4
NO_TIMESTAMP: Final = -1

_BATCH_LENGTH_MIN: Final = KAFKA_HEADER_BYTES - KAFKA_LOG_OVERHEAD
# Bound once: CPython 3.11 calls a method of a name imported with ``from`` without LOAD_METHOD (it
# takes the name for a module's), making a bound method on every call of these per-batch paths.
_unpack_header: Final = KAFKA_HEADER.unpack_from
_make_header: Final = KafkaHeader._make
_pack_header: Final = KAFKA_HEADER.pack_into
_pack_crc: Final = KAFKA_CRC.pack_into

_CODEC_MASK: Final = 0x07
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


# ----------------------------------------------------------------------------------------------------------- check


def checked_header(view: memoryview, position: int) -> tuple[KafkaHeader, int]:
    """The header of the whole batch at ``position``, its CRC and attributes checked, and the
    batch's size in bytes; ``RecordBatchError`` for a truncated or invalid one."""
    present = len(view) - position
    where = f"batch at position {position}"
    if present <= KAFKA_MAGIC_OFFSET:
        raise RecordBatchError(f"{where}: truncated, {present} bytes present, the header needs {KAFKA_HEADER_BYTES}")
    magic = view[position + KAFKA_MAGIC_OFFSET]
    if magic != MAGIC:
        raise RecordBatchError(f"{where}: magic {magic}, only magic {MAGIC} is supported (Produce v3+)")
    if present < KAFKA_HEADER_BYTES:
        raise RecordBatchError(f"{where}: truncated, {present} bytes present, the header needs {KAFKA_HEADER_BYTES}")
    header = _make_header(_unpack_header(view, position))
    if header.batch_length < _BATCH_LENGTH_MIN:
        raise RecordBatchError(f"{where}: batch_length {header.batch_length} is below the minimum {_BATCH_LENGTH_MIN}")
    batch_bytes = KAFKA_LOG_OVERHEAD + header.batch_length
    if batch_bytes > present:
        raise RecordBatchError(f"{where}: truncated, batch_length says {batch_bytes} bytes, {present} present")
    crc_computed = crc32c.crc32c(view[position + KAFKA_ATTRIBUTES_OFFSET : position + batch_bytes])
    if crc_computed != header.crc:
        raise RecordBatchError(f"{where}: CRC mismatch, stored {header.crc:#010x}, computed {crc_computed:#010x}")
    _check_attributes(header.attributes, where)
    return header, batch_bytes


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
    out = bytearray(KAFKA_HEADER_BYTES)
    out += section
    batch_length = len(out) - KAFKA_LOG_OVERHEAD
    if batch_length > _INT32_MAX:
        raise ValueError(f"batch of {len(out)} bytes exceeds int32")
    last_offset_delta = deltas[-1] if count else -1
    try:
        _pack_header(out, 0, base_offset, batch_length, partition_leader_epoch, MAGIC, 0, compression,
                     last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                     base_sequence, count)  # fmt: skip
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from None
    with memoryview(out) as view:
        crc = crc32c.crc32c(view[KAFKA_ATTRIBUTES_OFFSET:])
    _pack_crc(out, KAFKA_CRC_OFFSET, crc)
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
