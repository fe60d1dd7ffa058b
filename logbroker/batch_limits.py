"""What one produced batch may hold, checked before it is stored (decisions 0157 and 0220).

The broker stores prebuilt batches as they are and decodes them only when a reader asks, so the
cost of a batch to its readers (a JSON fetch, a push stream, a queue receive) is what it decodes
to, not the bytes it was sent as: 440 KB of zstd can hold 6.5 million empty records. A batch is
refused when it holds more than ``BATCH_RECORDS_MAX`` records or its records section decompresses
(bounded: a compressed section is first drained a piece at a time, so at most
``KEPT_BYTES_MAX`` are held before it is known to fit) to more than ``BATCH_RECORDS_BYTES_MAX``.
Batches the broker builds itself (JSON and msgpack produce, queue sends) are within the same
bounds by construction: at most ``BATCH_RECORDS_MAX`` records per request, uncompressed, at most
the topic's ``max_batch_bytes``, itself at most ``BATCH_RECORDS_BYTES_MAX``.

Every record row is then decoded and checked as every reader will decode it (decision 0220):
``[offset_delta, timestamp_delta, key, value, headers]`` with the offset deltas ``0 .. n-1`` in
order, integer timestamp deltas, key and value bin or nil, headers ``[name str, value bin]``
pairs, the rules ``segments.batch.section_columns`` holds readers to. The rows are decoded and
typed in one pass in C by msgspec against that schema (decision 0246: three times cheaper than
decoding with msgpack and checking column by column, which cost produce a third of its
throughput); every record's timestamp within
``[TIMESTAMP_MIN, TIMESTAMP_MAX]`` (a 64-bit integer in every client), and the header's
``max_timestamp`` the largest of them (retention and the time index read only the header). A
batch that passes is readable by every reader; one that does not would have stopped them all.

A batch whose records carry a header named like the broker's own (``x-logbroker-*`` in any case,
Unicode case folding; decision 0173) is refused too, by the same ``is_reserved_header`` that
JSON, msgpack and gRPC produce use.

Pure and synchronous; the HTTP layer runs it off the event loop for compressed or large batches.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

import msgspec

from logbroker.records import RESERVED_HEADER_PREFIX, TIMESTAMP_MAX, TIMESTAMP_MIN, is_reserved_header
from segments.batch import (
    BATCH_RECORDS_BYTES_MAX,
    BATCH_RECORDS_MAX,
    CONTROL_FLAG,
    DEFAULT_RECORDS_BYTES_MAX,
    ENCRYPTED_FLAG,
    HEADER_SIZE,
    KAFKA_RECORDS_FLAG,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    dense_deltas,
    parse_header,
    validate_batch,
)
from segments.compression import Codec, SectionReader, decompress, open_section
from segments.errors import InvalidBatchError, RecordsTooLargeError

DRAIN_CHUNK_BYTES: Final = 1 << 20
# A compressed section up to this size is kept from the draining pass and decoded from it; a larger
# one is decompressed again once it is known to fit (so a bomb costs at most this much memory).
KEPT_BYTES_MAX: Final = 1 << 20
# Above this many bytes an uncompressed batch is checked off the event loop as well (decoding).
LOOP_CHECK_BYTES_MAX: Final = 256 * 1024
# Fetched batches up to this many bytes, none compressed, are decoded and rendered on the event loop
# (about a hundred small records, well under a millisecond): handing them to a thread costs the
# loop more, as that thread must take the GIL from a busy loop (decision 0251).
READ_INLINE_BYTES_MAX: Final = 16 * 1024
# The rows as every reader decodes them: exact types (a msgpack str is not bin, a bool not an int).
_ROWS: Final = msgspec.msgpack.Decoder(tuple[tuple[int, int, bytes | None, bytes | None,
                                                  tuple[tuple[str, bytes], ...]], ...])
_OFFSET_DELTA, _TIMESTAMP_DELTA, _HEADERS = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(4)


class CheckedBatch(NamedTuple):
    """A batch that passed ``check_batch``: its header and the least and greatest timestamp of
    its records (ms)."""

    header: BatchHeader
    timestamp_min: int
    timestamp_max: int


def is_compressed(batch: bytes | memoryview) -> bool:
    """True when ``batch`` starts with a header whose records section is compressed (checking it
    means decompressing: worth moving off the event loop)."""
    return len(batch) >= HEADER_SIZE and parse_header(batch).codec != Codec.NONE


def is_costly(batch: bytes | memoryview) -> bool:
    """True when checking ``batch`` is worth moving off the event loop: it is compressed, or large."""
    return len(batch) > LOOP_CHECK_BYTES_MAX or is_compressed(batch)


def is_costly_read(data: bytes | memoryview) -> bool:
    """True when decoding and rendering fetched batches is worth moving off the event loop: they
    are more than ``READ_INLINE_BYTES_MAX`` bytes, or one of them is compressed (a few compressed
    bytes can stand for a hundred thousand records). Reads headers only; a header that is not
    whole ends the walk (the decoder reports it)."""
    if len(data) > READ_INLINE_BYTES_MAX:
        return True
    position = 0
    while len(data) - position >= HEADER_SIZE:
        header = parse_header(data, position)
        if header.codec != Codec.NONE:
            return True
        position += header.size_bytes
    return False


def check_batch(batch: bytes | memoryview) -> CheckedBatch:
    """``batch`` checked as one valid batch within the bounds whose every record every reader can
    decode, else ``InvalidBatchError`` (400) or ``RecordsTooLargeError`` (413)."""
    header = validate_batch(batch, size_bytes_max=DEFAULT_RECORDS_BYTES_MAX)
    if header.attributes & ENCRYPTED_FLAG:
        raise InvalidBatchError("a produced batch cannot carry the encrypted-at-rest flag (attributes bit 6): the "
                                "node encrypts")
    if header.attributes & CONTROL_FLAG:
        raise InvalidBatchError("a produced batch cannot be a control batch (attributes bit 5): only the broker "
                                "writes those")
    if header.attributes & KAFKA_RECORDS_FLAG:  # checked here as msgpack, it would be read as Kafka's records
        raise InvalidBatchError("a produced batch cannot carry Kafka's record format (attributes bit 7): only the "
                                "Kafka listener stores those")
    if header.record_count > BATCH_RECORDS_MAX:
        raise RecordsTooLargeError(f"the batch holds {header.record_count} records; at most {BATCH_RECORDS_MAX} "
                                   f"may be sent in one batch", limit=BATCH_RECORDS_MAX)
    records = memoryview(batch)[HEADER_SIZE:]
    if header.codec == Codec.NONE:
        if len(records) > BATCH_RECORDS_BYTES_MAX:
            raise _too_large()
        section: bytes | memoryview = records
    else:
        kept = _drained(open_section(header.codec, records, BATCH_RECORDS_BYTES_MAX))
        section = kept if kept is not None else decompress(header.codec, records, BATCH_RECORDS_BYTES_MAX)
    rows = _rows(header, section)
    headers = tuple(map(_HEADERS, rows))
    if headers.count(()) != len(headers):
        check_header_names(headers)
    low, high = _timestamps(header, rows)
    return CheckedBatch(header, low, high)


def _rows(header: BatchHeader, section: bytes | memoryview) -> tuple[tuple[Any, ...], ...]:
    try:
        rows: tuple[tuple[Any, ...], ...] = _ROWS.decode(section)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as exc:  # a header name not UTF-8
        raise InvalidBatchError(f"the records are not [offset_delta int, timestamp_delta int, key bin|nil, "
                                f"value bin|nil, headers [[name str, value bin]...]] rows: {exc}") from exc
    if len(rows) != header.record_count:
        raise InvalidBatchError(f"the header says {header.record_count} records but the records section holds "
                                f"{len(rows)}")
    if tuple(map(_OFFSET_DELTA, rows)) != dense_deltas(len(rows)):
        raise InvalidBatchError("record offset deltas must be 0, 1, 2 ... in order")
    return rows


def check_header_names(headers: Iterable[Iterable[tuple[str, bytes | None]]]) -> None:
    """Refuse a header named like the broker's own in any record's ``headers``."""
    names = {pair[0] for pairs in headers for pair in pairs}  # each distinct name looked at once
    for name in names:
        if is_reserved_header(name):
            raise InvalidBatchError(f"header names starting with {RESERVED_HEADER_PREFIX!r} are the broker's "
                                    f"own, not {name[:80]!r}")


def _timestamps(header: BatchHeader, rows: tuple[tuple[Any, ...], ...]) -> tuple[int, int]:
    if header.attributes & TIMESTAMP_TYPE_LOG_APPEND:
        low = high = header.max_timestamp
    else:
        deltas = tuple(map(_TIMESTAMP_DELTA, rows))
        if deltas.count(0) == len(deltas):  # one timestamp for the batch, as most clients send
            low = high = header.first_timestamp
        else:
            low, high = header.first_timestamp + min(deltas), header.first_timestamp + max(deltas)
        if high != header.max_timestamp:
            raise InvalidBatchError(f"the header's max_timestamp {header.max_timestamp} is not the greatest "
                                    f"timestamp of its records ({high})")
    if low < TIMESTAMP_MIN or high > TIMESTAMP_MAX or not TIMESTAMP_MIN <= header.first_timestamp <= TIMESTAMP_MAX:
        raise InvalidBatchError(f"record timestamps must lie in [{TIMESTAMP_MIN}, {TIMESTAMP_MAX}] ms")
    return low, high


def _drained(section: SectionReader) -> bytes | None:
    """Decompress a whole section a piece at a time to learn that it stays within the bound
    (``RecordsTooLargeError`` past it); its bytes when they fit in ``KEPT_BYTES_MAX``, else None
    (only the size is learnt: the caller decompresses it again)."""
    kept: list[bytes] | None = []
    size = 0
    while piece := section.read(DRAIN_CHUNK_BYTES):
        size += len(piece)
        if kept is not None:
            kept.append(piece)
            if size > KEPT_BYTES_MAX:
                kept = None
    return None if kept is None else b"".join(kept)


def _too_large() -> RecordsTooLargeError:
    return RecordsTooLargeError(f"the records section is larger than {BATCH_RECORDS_BYTES_MAX} bytes once "
                                f"decompressed", limit=BATCH_RECORDS_BYTES_MAX)
