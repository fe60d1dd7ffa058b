"""What one produced batch may hold, checked before it is stored (decision 0157).

The broker stores prebuilt batches as they are and decodes them only when a reader asks, so the
cost of a batch to its readers (a JSON fetch, a push stream, a queue receive) is what it decodes
to, not the bytes it was sent as: 440 KB of zstd can hold 6.5 million empty records. A batch is
refused when it holds more than ``BATCH_RECORDS_MAX`` records or its records section decompresses
(bounded: at most one byte past the limit is ever produced) to more than
``BATCH_RECORDS_BYTES_MAX``, and when its records section is not the array of ``record_count``
records its header says. Batches the broker builds itself (JSON and msgpack produce, queue sends)
are within the same bounds by construction: at most ``BATCH_RECORDS_MAX`` records per request,
uncompressed, at most the topic's ``max_batch_bytes``, itself at most ``BATCH_RECORDS_BYTES_MAX``.

A batch whose records carry a header named like the broker's own (``x-logbroker-*``, in any case;
decision 0173) is refused too. The (decompressed) records section is searched for the prefix as
it is read, lowered a piece at a time; only a batch where it appears (in a name or a value) is
decoded to look at its header names, within the bounds above.

Pure and synchronous; the HTTP layer runs it off the event loop for compressed or large batches.
"""

from __future__ import annotations

from typing import Final

import msgpack

from logbroker.records import RESERVED_HEADER_PREFIX, is_reserved_header
from segments.batch import (
    BATCH_RECORDS_BYTES_MAX,
    BATCH_RECORDS_MAX,
    DEFAULT_RECORDS_BYTES_MAX,
    HEADER_SIZE,
    BatchHeader,
    decode_columns,
    parse_header,
    validate_batch,
)
from segments.compression import Codec, SectionReader, open_section
from segments.errors import InvalidBatchError, RecordsTooLargeError

ARRAY_HEADER_BYTES_MAX: Final = 5  # msgpack array32: a type byte and a u32 length
DRAIN_CHUNK_BYTES: Final = 1 << 20
RESERVED: Final = RESERVED_HEADER_PREFIX.encode()
# Above this many bytes an uncompressed batch is checked off the event loop as well (the search).
LOOP_CHECK_BYTES_MAX: Final = 256 * 1024


def is_compressed(batch: bytes | memoryview) -> bool:
    """True when ``batch`` starts with a header whose records section is compressed (checking it
    means decompressing: worth moving off the event loop)."""
    return len(batch) >= HEADER_SIZE and parse_header(batch).codec != Codec.NONE


def is_costly(batch: bytes | memoryview) -> bool:
    """True when checking ``batch`` is worth moving off the event loop: it is compressed, or large."""
    return len(batch) > LOOP_CHECK_BYTES_MAX or is_compressed(batch)


def check_batch(batch: bytes | memoryview) -> BatchHeader:
    """The header of ``batch`` if it is one valid batch within the bounds, else
    ``InvalidBatchError`` (400) or ``RecordsTooLargeError`` (413)."""
    header = validate_batch(batch, size_bytes_max=DEFAULT_RECORDS_BYTES_MAX)
    if header.record_count > BATCH_RECORDS_MAX:
        raise RecordsTooLargeError(f"the batch holds {header.record_count} records; at most {BATCH_RECORDS_MAX} "
                                   f"may be sent in one batch", limit=BATCH_RECORDS_MAX)
    records = memoryview(batch)[HEADER_SIZE:]
    if header.codec == Codec.NONE:
        if len(records) > BATCH_RECORDS_BYTES_MAX:
            raise _too_large()
        head = bytes(records[:ARRAY_HEADER_BYTES_MAX])
        mentioned = any(_mentions(records[i:i + DRAIN_CHUNK_BYTES + len(RESERVED) - 1])
                        for i in range(0, len(records), DRAIN_CHUNK_BYTES))
    else:
        head, mentioned = _decompressed_head(open_section(header.codec, records, BATCH_RECORDS_BYTES_MAX))
    count = _array_length(head)
    if count != header.record_count:
        raise InvalidBatchError(f"the header says {header.record_count} records but the records section is an "
                                f"array of {count}")
    if mentioned:
        _check_header_names(batch)
    return header


def _mentions(piece: bytes | memoryview) -> bool:
    return RESERVED in bytes(piece).lower()


def _check_header_names(batch: bytes | memoryview) -> None:
    for pairs in decode_columns(batch, size_bytes_max=BATCH_RECORDS_BYTES_MAX).headers:
        for name, _ in pairs:
            if is_reserved_header(name):
                raise InvalidBatchError(f"header names starting with {RESERVED_HEADER_PREFIX!r} are the broker's "
                                        f"own, not {name[:80]!r}")


def _decompressed_head(section: SectionReader) -> tuple[bytes, bool]:
    """The first bytes of a compressed section, after decompressing all of it (a piece at a time,
    keeping only the last few bytes of each) to learn that it stays within the bound, and whether
    the reserved header prefix appears in it."""
    head = section.read(ARRAY_HEADER_BYTES_MAX)
    tail, mentioned = head, False
    while piece := section.read(DRAIN_CHUNK_BYTES):
        mentioned = mentioned or _mentions(tail + piece)
        tail = piece[-(len(RESERVED) - 1):]
    return head, mentioned or _mentions(head)


def _too_large() -> RecordsTooLargeError:
    return RecordsTooLargeError(f"the records section is larger than {BATCH_RECORDS_BYTES_MAX} bytes once "
                                f"decompressed", limit=BATCH_RECORDS_BYTES_MAX)


def _array_length(head: bytes) -> int:
    unpacker = msgpack.Unpacker()
    unpacker.feed(head)
    try:
        count: int = unpacker.read_array_header()
    except (ValueError, msgpack.OutOfData, msgpack.FormatError, msgpack.StackError) as exc:
        raise InvalidBatchError("the records section is not a msgpack array") from exc
    return count
