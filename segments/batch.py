"""Record batch codec: the unit of append, replication, fetch and checksum.

Wire and disk layout (little-endian, fixed header, then the records section)::

    offset size field              note
    0      8    base_offset        u64, assigned by the leader on append (patched in place)
    8      4    batch_length       u32, bytes after this field
    12     4    leader_epoch       u32, stamped by the leader on append (patched in place)
    16     1    magic              u8, format version (1)
    17     8    checksum           u64, xxh3_64 of every byte after this field
    25     2    attributes         u16, bits 0-2 codec, bit 3 timestamp type, bit 5 control,
                                   bit 6 encrypted at rest (``segments.encryption``), bit 7 the
                                   records section is Kafka's (``segments.kafka_records``)
    27     4    last_offset_delta  u32, record_count - 1
    31     8    first_timestamp    i64, ms
    39     8    max_timestamp      i64, ms
    47     8    producer_id        i64, -1 when not idempotent
    55     2    producer_epoch     i16
    57     4    base_sequence      i32
    61     4    record_count       u32
    65     -    records            msgpack array of [offset_delta, timestamp_delta, key, value,
                                   headers]; compressed as a whole when the codec is not 0. With
                                   bit 7, Kafka's records section (magic 2) as a Kafka producer
                                   sent it, codec numbers Kafka's (2 is snappy; decision 0389)

Because the checksum starts after itself, patching the offset and epoch on append never requires
re-checksumming. The broker never decodes the records section on the hot path: it validates the
header and the checksum (``validate_batch``), patches the 16-byte prefix (``patched_prefix``) and
appends the rest of the caller's bytes as they are.

Everything here is pure: functions over ``bytes``/``memoryview``, no files, no clock.
"""

from __future__ import annotations

import functools
import itertools
import operator
import struct
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import msgpack
import xxhash

from segments import kafka_records
from segments.compression import Codec, compress, decompress
from segments.errors import CorruptBatchError, InvalidArgumentError, InvalidBatchError, UndecryptableBatchError

MAGIC = 1

HEADER = struct.Struct("<QIIBQHIqqqhiI")
HEADER_SIZE = HEADER.size
# The part of the header that precedes the checksum and may be patched without re-checksumming.
PREFIX = struct.Struct("<QII")
PREFIX_SIZE = PREFIX.size
# batch_length counts the bytes after base_offset and batch_length themselves.
LENGTH_PREFIX_SIZE = struct.calcsize("<QI")
MAGIC_OFFSET = PREFIX_SIZE
CHECKSUM_STRUCT = struct.Struct("<Q")
CHECKSUM_OFFSET = MAGIC_OFFSET + 1
CHECKSUMMED_FROM = CHECKSUM_OFFSET + CHECKSUM_STRUCT.size
ATTRIBUTES_OFFSET = CHECKSUMMED_FROM
LAST_OFFSET_DELTA_OFFSET = CHECKSUMMED_FROM + 2
# Everything after the checksum and before the records section.
BODY_HEADER = struct.Struct("<HIqqqhiI")

assert HEADER_SIZE == 65
assert PREFIX_SIZE == 16 and LENGTH_PREFIX_SIZE == 12
assert CHECKSUMMED_FROM == 25 and CHECKSUMMED_FROM + BODY_HEADER.size == HEADER_SIZE

CODEC_MASK = 0b111
TIMESTAMP_TYPE_LOG_APPEND = 1 << 3
CONTROL_FLAG = 1 << 5
# Set on a stored batch whose records section is sealed with a node key (``segments.encryption``);
# such a batch is decoded only after ``open_batch``, never here.
ENCRYPTED_FLAG = 1 << 6
# Set on a batch whose records section is Kafka's record format (``segments.kafka_records``):
# written by the Kafka listener, decoded by every other reader there (decision 0389).
KAFKA_RECORDS_FLAG = 1 << 7
KNOWN_ATTRIBUTES = CODEC_MASK | TIMESTAMP_TYPE_LOG_APPEND | CONTROL_FLAG | ENCRYPTED_FLAG | KAFKA_RECORDS_FLAG
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
U32_MAX = (1 << 32) - 1
DEFAULT_RECORDS_BYTES_MAX = 64 * 1024 * 1024
# The most one produced batch may hold (decision 0157): records, and bytes of its records section
# once decompressed. What a reader decodes in one piece is bounded by these, not by the few
# hundred compressed bytes a batch of millions of empty records takes.
BATCH_RECORDS_MAX = 100_000
BATCH_RECORDS_BYTES_MAX = 32 * 1024 * 1024
assert BATCH_RECORDS_BYTES_MAX <= DEFAULT_RECORDS_BYTES_MAX
DENSE_DELTAS_CACHED_MAX = 4096

_checksum = xxhash.xxh3_64_intdigest
# One packer, reused: the C packer holds the GIL while it runs, so threads cannot interleave in it.
_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack


class BatchHeader(NamedTuple):
    """The fixed header of a record batch, as stored."""

    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    checksum: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        """Total size of the batch, header included."""
        return self.batch_length + LENGTH_PREFIX_SIZE

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK


class Record(NamedTuple):
    """One decoded record."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


class ProducerRecord(NamedTuple):
    """One record as a producer hands it to ``encode_batch``; ``timestamp`` None means now."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes]] = ()
    timestamp: int | None = None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def encode_batch(
    records: Sequence[ProducerRecord],
    *,
    base_offset: int = 0,
    leader_epoch: int = 0,
    codec: Codec = Codec.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    timestamp_ms: int | None = None,
) -> bytes:
    """Build one batch from records; ``timestamp_ms`` is used for records without a timestamp."""
    if not records:
        raise InvalidArgumentError("a batch needs at least one record")
    default_ts = now_ms() if timestamp_ms is None else timestamp_ms
    stamps = [default_ts if r.timestamp is None else r.timestamp for r in records]
    first_ts = stamps[0]
    rows = [
        [i, ts - first_ts, r.key, r.value, r.headers]
        for i, (r, ts) in enumerate(zip(records, stamps, strict=True))
    ]
    return _assemble(
        _pack_rows(rows),
        count=len(rows),
        first_ts=first_ts,
        max_ts=max(stamps),
        base_offset=base_offset,
        leader_epoch=leader_epoch,
        codec=codec,
        producer=(producer_id, producer_epoch, base_sequence),
    )


def encode_values(
    values: Sequence[bytes], *, timestamp_ms: int | None = None, codec: Codec = Codec.NONE
) -> bytes:
    """Fast path for the common case: values only, no keys, headers or per-record timestamps."""
    if not values:
        raise InvalidArgumentError("a batch needs at least one record")
    ts = now_ms() if timestamp_ms is None else timestamp_ms
    rows = [[i, 0, None, v, ()] for i, v in enumerate(values)]
    return _assemble(
        _pack_rows(rows),
        count=len(rows),
        first_ts=ts,
        max_ts=ts,
        base_offset=0,
        leader_epoch=0,
        codec=codec,
        producer=(NO_PRODUCER_ID, -1, NO_SEQUENCE),
    )


def _pack_rows(rows: list[list[Any]]) -> bytes:
    try:
        packed: bytes = _packb(rows)
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"records cannot be encoded: {exc}") from exc
    return packed


def _assemble(
    section: bytes,
    *,
    count: int,
    first_ts: int,
    max_ts: int,
    base_offset: int,
    leader_epoch: int,
    codec: Codec,
    producer: tuple[int, int, int],
) -> bytes:
    if count - 1 > U32_MAX:
        raise InvalidArgumentError(f"too many records in one batch: {count}")
    return wrap_section(compress(Codec(codec), section), attributes=int(codec), count=count, first_ts=first_ts,
                        max_ts=max_ts, producer=producer, base_offset=base_offset, leader_epoch=leader_epoch)


def wrap_section(records_section: bytes | memoryview, *, attributes: int, count: int, first_ts: int, max_ts: int,
                 producer: tuple[int, int, int], base_offset: int = 0, leader_epoch: int = 0) -> bytes:
    """One batch around a records section that is already encoded (and compressed) as
    ``attributes`` says; the section is copied once, into the batch."""
    body_header = BODY_HEADER.pack(attributes, count - 1, first_ts, max_ts, producer[0], producer[1], producer[2],
                                   count)
    digest = xxhash.xxh3_64(body_header)
    digest.update(records_section)
    batch_length = HEADER_SIZE - LENGTH_PREFIX_SIZE + len(records_section)
    head = PREFIX.pack(base_offset, batch_length, leader_epoch)
    return b"".join((head, bytes((MAGIC,)), CHECKSUM_STRUCT.pack(digest.intdigest()), body_header, records_section))


def parse_header(buf: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Unpack a header without any check; ``buf`` must hold ``HEADER_SIZE`` bytes at ``position``."""
    return BatchHeader._make(HEADER.unpack_from(buf, position))


def check_header(header: BatchHeader, *, size_bytes_max: int, position: int = -1) -> None:
    """Check the header's own fields (everything but the checksum); raise ``InvalidBatchError``."""
    # Plain field access only (no properties): this runs once per appended and scanned batch.
    batch_length, count, attributes = header[1], header[12], header[5]
    if header[3] != MAGIC:
        raise InvalidBatchError(f"unsupported batch magic {header.magic} at position {position}")
    if batch_length < HEADER_SIZE - LENGTH_PREFIX_SIZE:
        raise InvalidBatchError(f"batch length {batch_length} is shorter than a header")
    if batch_length + LENGTH_PREFIX_SIZE > size_bytes_max:
        raise InvalidBatchError(
            f"batch of {header.size_bytes} bytes at position {position} exceeds {size_bytes_max}"
        )
    if count != header[6] + 1 or count == 0:
        raise InvalidBatchError(
            f"record count {count} does not match last offset delta {header.last_offset_delta}"
        )
    codecs = kafka_records.CODECS if attributes & KAFKA_RECORDS_FLAG else _CODECS
    if attributes & ~KNOWN_ATTRIBUTES or (attributes & CODEC_MASK) not in codecs:
        raise InvalidBatchError(f"unknown batch attributes {attributes:#x}")


_CODECS = frozenset(int(c) for c in Codec)


def validate_batch(
    buf: bytes | memoryview, *, size_bytes_max: int = DEFAULT_RECORDS_BYTES_MAX, position: int = -1
) -> BatchHeader:
    """Validate that ``buf`` holds exactly one well-formed batch and return its header."""
    if len(buf) < HEADER_SIZE:
        raise InvalidBatchError(f"{len(buf)} bytes is shorter than a batch header ({HEADER_SIZE})")
    header = BatchHeader._make(HEADER.unpack_from(buf))
    check_header(header, size_bytes_max=size_bytes_max, position=position)
    if header[1] + LENGTH_PREFIX_SIZE != len(buf):
        raise InvalidBatchError(
            f"batch length field says {header.size_bytes} bytes but {len(buf)} were given"
        )
    computed = _checksum(memoryview(buf)[CHECKSUMMED_FROM:])
    if computed != header[4]:
        raise _checksum_mismatch(header, computed, position)
    return header


def verify_checksum(buf: bytes | memoryview, header: BatchHeader, *, position: int = -1) -> None:
    """Raise ``CorruptBatchError`` unless the stored checksum matches the batch bytes."""
    view = memoryview(buf)[CHECKSUMMED_FROM : header.size_bytes]
    computed = _checksum(view)
    if computed != header.checksum:
        raise _checksum_mismatch(header, computed, position)


def _checksum_mismatch(header: BatchHeader, computed: int, position: int) -> CorruptBatchError:
    return CorruptBatchError(
        f"batch checksum mismatch at position {position}: stored {header.checksum:#018x}, "
        f"computed {computed:#018x}",
        position=position,
        stored=header.checksum,
        computed=computed,
    )


def patched_prefix(header: BatchHeader, base_offset: int, leader_epoch: int) -> bytes:
    """The 16 bytes that replace the batch's prefix when it is appended at ``base_offset``."""
    return PREFIX.pack(base_offset, header.batch_length, leader_epoch)


def patch_in_place(buf: bytearray | memoryview, base_offset: int, leader_epoch: int) -> None:
    """Rewrite base offset and leader epoch of the batch at the start of a mutable buffer."""
    batch_length = struct.unpack_from("<I", buf, 8)[0]
    PREFIX.pack_into(buf, 0, base_offset, batch_length, leader_epoch)


class RecordColumns(NamedTuple):
    """One batch's records as columns (what columnar consumers such as Spark want)."""

    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: tuple[bytes | None, ...]
    values: tuple[bytes | None, ...]
    # Per record: () when it has no headers, else its [name, value] pairs.
    headers: tuple[tuple[tuple[str, bytes], ...], ...]
    has_headers: bool


def decode_columns(
    buf: bytes | memoryview, *, size_bytes_max: int = DEFAULT_RECORDS_BYTES_MAX
) -> RecordColumns:
    """Validate one batch and decode its records column-wise.

    The checksum proves the bytes are what the producer sent, not that the producer was honest, so
    every row is checked too (5 fields; integer deltas, increasing within the batch; key and value
    bytes or nil; headers ``[str, bytes]`` pairs). The checks run column-wise in C (``map``,
    ``count``, tuple comparison); a column that holds one constant (no keys, no headers, deltas
    0, 1, 2...) is recognised by a count, and only records that carry headers take a Python-level
    look. Consumers spend most of their time here, so each step is measured (``benchmarks``)."""
    header = validate_batch(buf, size_bytes_max=size_bytes_max)
    check_plain(header)
    return batch_columns(header, memoryview(buf)[HEADER_SIZE:header.size_bytes], size_bytes_max)


def batch_columns(header: BatchHeader, records: bytes | memoryview, size_bytes_max: int) -> RecordColumns:
    """The columns of a plain batch whose header is ``header`` and whose records section, as
    stored (compressed or not), is ``records``: either record format, decompressed within
    ``size_bytes_max``."""
    if header[5] & KAFKA_RECORDS_FLAG:
        section = kafka_records.decompress(header.codec, records, size_bytes_max)
        return RecordColumns(*kafka_records.columns(
            header.base_offset, header.record_count, header.first_timestamp, header.max_timestamp,
            bool(header.attributes & TIMESTAMP_TYPE_LOG_APPEND), section))
    return section_columns(header, decompress(header.codec, records, size_bytes_max))


def check_plain(header: BatchHeader) -> None:
    """Raise ``UndecryptableBatchError`` for a batch still sealed at rest: its records section is
    ciphertext, which no decoder may read as records."""
    if header[5] & ENCRYPTED_FLAG:
        raise UndecryptableBatchError(
            f"the batch at offset {header.base_offset} is encrypted at rest and was not decrypted "
            "(no key ring was given to this reader)", offset=header.base_offset)


def section_columns(header: BatchHeader, section: bytes | memoryview) -> RecordColumns:
    """Decode the (decompressed) msgpack records section of the batch whose header is ``header`` into
    columns, checking every row as ``decode_columns`` does (for a caller that has validated the
    header and decompressed the section already)."""
    try:
        rows = msgpack.unpackb(section, raw=False, use_list=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidBatchError(f"records section is not valid msgpack: {exc}") from exc
    count = header.record_count
    if type(rows) is not tuple or len(rows) != count:
        raise InvalidBatchError(f"records section does not hold {count} records")
    if set(map(type, rows)) != _TUPLE or set(map(len, rows)) != _FIVE:
        raise InvalidBatchError("a record must be an array of 5 fields")
    # Column by column with itemgetter: unlike ``zip(*rows)``, this allocates nothing the cyclic
    # garbage collector tracks but the columns themselves, which measurably matters here.
    deltas, ts_deltas, keys, values, headers = (tuple(map(field, rows)) for field in _FIELDS)
    if not _all_ints(ts_deltas) or not _all_bytes_or_none(keys) or not _all_bytes_or_none(values):
        raise InvalidBatchError("record deltas must be integers, keys and values bytes or nil")
    offsets = _offsets(header.base_offset, deltas, header.last_offset_delta)
    if header.attributes & TIMESTAMP_TYPE_LOG_APPEND:
        stamps: Sequence[int] = [header.max_timestamp] * count
    elif ts_deltas.count(0) == count:  # ints, so only a true 0 counts
        stamps = [header.first_timestamp] * count
    else:
        stamps = list(map(operator.add, itertools.repeat(header.first_timestamp), ts_deltas))
    has_headers = headers.count(_NO_HEADERS) != count
    if has_headers:
        headers = tuple(tuple(_header_pairs(h)) for h in headers)
    return RecordColumns(offsets, stamps, keys, values, headers, has_headers)


def decode_records(
    buf: bytes | memoryview, *, size_bytes_max: int = DEFAULT_RECORDS_BYTES_MAX
) -> list[Record]:
    """Validate one batch and decode its records (see ``decode_columns`` for what is checked)."""
    c = decode_columns(buf, size_bytes_max=size_bytes_max)
    # Most batches carry no headers at all: then ``list`` (in C) gives each record its own [].
    pairs = map(list, c.headers)
    return list(map(_make_record, zip(c.offsets, c.timestamps, c.keys, c.values, pairs, strict=True)))


# Builds a Record from a 5-tuple in C (``tuple.__new__``), twice as fast as calling the class.
_make_record = functools.partial(tuple.__new__, Record)
_TUPLE = frozenset({tuple})
_FIVE = frozenset({5})
_FIELDS = tuple(operator.itemgetter(i) for i in range(5))
_INT = frozenset({int})
_BYTES_OR_NONE = frozenset({bytes, type(None)})
_NO_HEADERS: tuple[()] = ()


def _all_ints(column: tuple[object, ...]) -> bool:
    # Exact types: ``count(0)`` or ``==`` would also take False and 0.0.
    return set(map(type, column)) == _INT


def _all_bytes_or_none(column: tuple[object, ...]) -> bool:
    return column.count(None) == len(column) or set(map(type, column)) <= _BYTES_OR_NONE


def dense_deltas(count: int) -> tuple[int, ...]:
    """``(0, 1, ..., count - 1)``: the deltas of a batch without gaps; kept for usual sizes only,
    so that a producer's huge batches cannot pin memory in whoever decodes them."""
    return _small_dense_deltas(count) if count <= DENSE_DELTAS_CACHED_MAX else tuple(range(count))


@functools.lru_cache(maxsize=16)
def _small_dense_deltas(count: int) -> tuple[int, ...]:
    return tuple(range(count))


def _offsets(base: int, deltas: tuple[int, ...], last_delta: int) -> Sequence[int]:
    if not _all_ints(deltas):
        raise InvalidBatchError("record offset deltas must be increasing integers within the batch")
    if deltas == dense_deltas(len(deltas)):
        return range(base, base + len(deltas))
    if any(b <= a for a, b in itertools.pairwise(deltas)) \
            or deltas[0] < 0 or deltas[-1] > last_delta:
        raise InvalidBatchError("record offset deltas must be increasing integers within the batch")
    return [base + d for d in deltas]


def _header_pairs(headers: object) -> list[tuple[str, bytes]]:
    if headers == _NO_HEADERS:
        return []
    if type(headers) is not tuple:
        raise InvalidBatchError("record headers must be an array")
    pairs = []
    for pair in headers:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not bytes:
            raise InvalidBatchError("a record header must be a [name str, value bin] pair")
        pairs.append(pair)
    return pairs


def iter_batches(
    buf: bytes | memoryview, *, size_bytes_max: int = DEFAULT_RECORDS_BYTES_MAX
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each complete, valid batch in a buffer of batches.

    Stops silently at a trailing partial batch; raises on a complete batch that is invalid.
    """
    view = memoryview(buf)
    position = 0
    while len(view) - position >= HEADER_SIZE:
        header = parse_header(view, position)
        check_header(header, size_bytes_max=size_bytes_max, position=position)
        end = position + header.size_bytes
        if end > len(view):
            return
        verify_checksum(view[position:end], header, position=position)
        yield position, header
        position = end
