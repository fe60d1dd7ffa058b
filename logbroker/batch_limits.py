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

Pure and synchronous; the HTTP layer runs it off the event loop for compressed batches.
"""

from __future__ import annotations

from typing import Final

import msgpack

from segments.batch import (
    BATCH_RECORDS_BYTES_MAX,
    BATCH_RECORDS_MAX,
    DEFAULT_RECORDS_BYTES_MAX,
    HEADER_SIZE,
    BatchHeader,
    parse_header,
    validate_batch,
)
from segments.compression import Codec, SectionReader, open_section
from segments.errors import InvalidBatchError, RecordsTooLargeError

ARRAY_HEADER_BYTES_MAX: Final = 5  # msgpack array32: a type byte and a u32 length
DRAIN_CHUNK_BYTES: Final = 1 << 20


def is_compressed(batch: bytes | memoryview) -> bool:
    """True when ``batch`` starts with a header whose records section is compressed (checking it
    means decompressing: worth moving off the event loop)."""
    return len(batch) >= HEADER_SIZE and parse_header(batch).codec != Codec.NONE


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
    else:
        head = _decompressed_head(open_section(header.codec, records, BATCH_RECORDS_BYTES_MAX))
    count = _array_length(head)
    if count != header.record_count:
        raise InvalidBatchError(f"the header says {header.record_count} records but the records section is an "
                                f"array of {count}")
    return header


def _decompressed_head(section: SectionReader) -> bytes:
    """The first bytes of a compressed section, after decompressing all of it (a piece at a time,
    keeping none) to learn that it stays within the bound."""
    head = section.read(ARRAY_HEADER_BYTES_MAX)
    while section.read(DRAIN_CHUNK_BYTES):
        pass
    return head


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
