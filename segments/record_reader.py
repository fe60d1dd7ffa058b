"""Decode a batch's records one at a time, as far as the reader wants them.

``decode_columns`` decodes a whole batch at once, which is right for consumers that take every
record. A reader that wants the first few records of a batch (a JSON fetch with ``max_records``,
one push-stream piece) uses ``iter_records``: the records section is decompressed and unpacked a
chunk at a time (``compression.open_section``; a small uncompressed section is unpacked whole,
``WHOLE_SECTION_BYTES_MAX``), and each record is checked as it is read with the
same rules as ``decode_columns`` (5 fields; integer deltas, increasing, within the batch; key and
value bytes or nil; headers ``[str, bytes]`` pairs). What it costs is proportional to the records
taken, not to the batch: a batch of millions of empty records compresses to a few hundred bytes.

A batch holds ``record_count`` records whose offset deltas increase within ``[0, record_count)``
(the header's last offset delta is the count minus one), so record ``i`` has delta ``i``: records
before ``from_offset`` are skipped unread (msgpack's ``skip``, in C), and each record read must
have the delta of its place. Records skipped or after the ones taken are not checked.

A batch in Kafka's record format (``segments.kafka_records``) is decompressed whole (its section's
size was bounded when it was produced, ``BATCH_RECORDS_BYTES_MAX``) and its records are read one at
a time: the ones before ``from_offset`` are walked over without being built.

Pure: no files, no clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import msgpack

from segments import kafka_records
from segments.batch import (
    DEFAULT_RECORDS_BYTES_MAX,
    HEADER_SIZE,
    KAFKA_RECORDS_FLAG,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    Record,
    check_plain,
    validate_batch,
)
from segments.compression import Codec, open_section
from segments.errors import InvalidBatchError

READ_CHUNK_BYTES: Final = 1 << 16
# An uncompressed section up to this size is unpacked whole: at most this much is decoded beyond
# the records a reader takes.
WHOLE_SECTION_BYTES_MAX: Final = 1 << 16
_UNPACK_ERRORS = (ValueError, msgpack.FormatError, msgpack.StackError)


def iter_records(buf: bytes | memoryview, *, from_offset: int = 0,
                 size_bytes_max: int = DEFAULT_RECORDS_BYTES_MAX) -> Iterator[Record]:
    """Validate one batch (header and checksum) and yield its records at or after
    ``from_offset``, decoding each only when it is asked for; ``InvalidBatchError`` when the
    records section or a record read so far is malformed."""
    header = validate_batch(buf, size_bytes_max=size_bytes_max)
    check_plain(header)
    if header.attributes & KAFKA_RECORDS_FLAG:
        yield from _kafka_records(buf, header, from_offset, size_bytes_max)
        return
    if header.codec == Codec.NONE and len(buf) - HEADER_SIZE <= WHOLE_SECTION_BYTES_MAX:
        rows = _whole_section(memoryview(buf)[HEADER_SIZE:], header.record_count)
        if rows is not None:
            skipped = min(max(from_offset - header.base_offset, 0), len(rows))
            for index in range(skipped, len(rows)):
                yield _record(rows[index], header, index)
            return
    section = open_section(header.codec, memoryview(buf)[HEADER_SIZE:], size_bytes_max)
    unpacker = msgpack.Unpacker(section, raw=False, use_list=False, strict_map_key=True,
                                read_size=READ_CHUNK_BYTES, max_buffer_size=size_bytes_max)
    try:
        count = unpacker.read_array_header()
    except (*_UNPACK_ERRORS, msgpack.OutOfData) as exc:
        raise InvalidBatchError(f"records section is not a msgpack array: {exc}") from exc
    if count != header.record_count:
        raise InvalidBatchError(f"records section does not hold {header.record_count} records")
    skipped = min(max(from_offset - header.base_offset, 0), count)
    for _ in range(skipped):
        _skip(unpacker)
    for index in range(skipped, count):
        yield _record(_unpack(unpacker), header, index)
    try:
        unpacker.unpack()
    except msgpack.OutOfData:
        return
    except _UNPACK_ERRORS:
        pass
    raise InvalidBatchError("records section has data after its records")


def _kafka_records(buf: bytes | memoryview, header: BatchHeader, from_offset: int,
                   size_bytes_max: int) -> Iterator[Record]:
    section = kafka_records.decompress(header.codec, memoryview(buf)[HEADER_SIZE:header.size_bytes], size_bytes_max)
    for offset, timestamp, key, value, headers in kafka_records.iter_records(
            header.base_offset, header.record_count, header.first_timestamp, header.max_timestamp,
            bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND), section, from_offset):
        yield Record(offset, timestamp, key, value, list(headers))


def _whole_section(section: memoryview, count: int) -> tuple[Any, ...] | None:
    """A small uncompressed records section unpacked in one call (the tail of a live partition is
    read one small batch at a time, where an incremental reader cost more than the records); None
    when it is not a well-formed array of ``count`` items, so the incremental reader says where."""
    try:
        rows = msgpack.unpackb(section, raw=False, use_list=False, strict_map_key=True)
    except (*_UNPACK_ERRORS, msgpack.OutOfData):
        return None
    return rows if type(rows) is tuple and len(rows) == count else None


def _unpack(unpacker: msgpack.Unpacker) -> Any:
    try:
        return unpacker.unpack()
    except msgpack.OutOfData as exc:
        raise InvalidBatchError("records section ends before its last record") from exc
    except _UNPACK_ERRORS as exc:
        raise InvalidBatchError(f"records section is not valid msgpack: {exc}") from exc


def _skip(unpacker: msgpack.Unpacker) -> None:
    try:
        unpacker.skip()
    except msgpack.OutOfData as exc:
        raise InvalidBatchError("records section ends before its last record") from exc
    except _UNPACK_ERRORS as exc:
        raise InvalidBatchError(f"records section is not valid msgpack: {exc}") from exc


def _record(row: Any, header: BatchHeader, index: int) -> Record:
    if type(row) is not tuple or len(row) != 5:
        raise InvalidBatchError("a record must be an array of 5 fields")
    delta, ts_delta, key, value, headers = row
    if type(delta) is not int or type(ts_delta) is not int:
        raise InvalidBatchError("record deltas must be integers, keys and values bytes or nil")
    if delta != index:
        raise InvalidBatchError("record offset deltas must be increasing integers within the batch")
    if (key is not None and type(key) is not bytes) or (value is not None and type(value) is not bytes):
        raise InvalidBatchError("record deltas must be integers, keys and values bytes or nil")
    if header.attributes & TIMESTAMP_TYPE_LOG_APPEND:
        timestamp = header.max_timestamp
    else:
        timestamp = header.first_timestamp + ts_delta
    return Record(header.base_offset + delta, timestamp, key, value, _header_pairs(headers))


def _header_pairs(headers: object) -> list[tuple[str, bytes]]:
    if type(headers) is not tuple:
        raise InvalidBatchError("record headers must be an array")
    for pair in headers:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not bytes:
            raise InvalidBatchError("a record header must be a [name str, value bin] pair")
    return list(headers)
