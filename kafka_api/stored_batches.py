"""Kafka record batches kept as Kafka wrote them (decision 0389): Produce stores a Kafka batch's
records section unchanged under the broker's own header, and Fetch gives such a batch back by
rebuilding Kafka's 61-byte header, so neither decodes or re-encodes a record on Kafka's own path.

``stored_batch`` is where a Kafka producer's bytes are judged before they are stored: exactly one
batch (as Kafka requires of Produce v3+), its CRC32C, magic 2, no transactional or control batch,
at most ``BATCH_RECORDS_MAX`` records and ``BATCH_RECORDS_BYTES_MAX`` decompressed bytes, a section
every reader (Kafka's Java one, librdkafka, aiokafka, the reference decoder, the Spark reader) reads
alike (``segments.kafka_records.produced_facts``), timestamps in the broker's range and no header
named like the broker's own. The stored
header's ``max_timestamp`` is the records' greatest, whatever the producer wrote (as Kafka's broker
does); the producer id, epoch and base sequence are kept for de-duplication.

``kafka_batches`` renders a fetch: a Kafka-format batch whole (records before the fetch offset
included: Kafka's clients skip them), a batch in the broker's own format converted record by record
(``kafka_api.record_batch``). Pure: no I/O."""

from __future__ import annotations

from typing import Final

import crc32c

from kafka_api import record_batch
from logbroker.batch_limits import CheckedBatch, check_header_names
from logbroker.records import TIMESTAMP_MAX, TIMESTAMP_MIN, take_records
from segments import kafka_records
from segments.batch import (
    BATCH_RECORDS_BYTES_MAX,
    BATCH_RECORDS_MAX,
    CODEC_MASK,
    HEADER_SIZE,
    KAFKA_RECORDS_FLAG,
    TIMESTAMP_TYPE_LOG_APPEND,
    BatchHeader,
    iter_batches,
    parse_header,
    wrap_section,
)
from segments.errors import InvalidBatchError, RecordsTooLargeError
from segments.kafka_records import (
    KAFKA_HEADER_BODY,
    KAFKA_HEADER_BYTES,
    KAFKA_HEADER_PREFIX,
    KAFKA_LOG_OVERHEAD,
    KAFKA_MAGIC,
)

# Bound once: CPython 3.11 calls a method of a name imported with ``from`` without LOAD_METHOD (it
# takes the name for a module's), making a bound method on every call of this per-batch path.
_pack_prefix: Final = KAFKA_HEADER_PREFIX.pack
_pack_body: Final = KAFKA_HEADER_BODY.pack


def stored_batch(data: bytes, *, bytes_max: int) -> tuple[bytes, CheckedBatch, int]:
    """The stored batch for a Produce partition's ``records`` (one Kafka batch), the check its
    records passed, and the bytes its section decompressed to (0 when it was not compressed), at
    most ``bytes_max``. ``record_batch.RecordBatchError`` for bytes that are not one valid batch,
    ``InvalidBatchError`` or ``RecordsTooLargeError`` for records the broker does not store."""
    with memoryview(data) as view:
        header, size = record_batch.checked_header(view, 0)
    if size != len(data):
        raise record_batch.RecordBatchError("a Produce carries exactly one record batch per partition "
                                            f"({len(data) - size} bytes follow the first)")
    count = header.record_count
    if count <= 0 or header.last_offset_delta != count - 1:
        raise record_batch.RecordBatchError(f"last_offset_delta {header.last_offset_delta} with {count} records")
    if count > BATCH_RECORDS_MAX:
        raise RecordsTooLargeError(f"the batch holds {count} records; at most {BATCH_RECORDS_MAX} may be sent in "
                                   "one batch", limit=BATCH_RECORDS_MAX)
    codec = header.attributes & CODEC_MASK
    section = memoryview(data)[KAFKA_HEADER_BYTES:]
    plain = kafka_records.decompress(codec, section, min(bytes_max, BATCH_RECORDS_BYTES_MAX))
    if len(plain) > BATCH_RECORDS_BYTES_MAX:
        raise RecordsTooLargeError(f"the records section is larger than {BATCH_RECORDS_BYTES_MAX} bytes",
                                   limit=BATCH_RECORDS_BYTES_MAX)
    low, high, headers = kafka_records.produced_facts(plain, count, header.base_timestamp)
    if low < TIMESTAMP_MIN or high > TIMESTAMP_MAX or not TIMESTAMP_MIN <= header.base_timestamp <= TIMESTAMP_MAX:
        raise InvalidBatchError(f"record timestamps must lie in [{TIMESTAMP_MIN}, {TIMESTAMP_MAX}] ms")
    if headers:
        check_header_names(headers)
    stored = wrap_section(section, attributes=codec | KAFKA_RECORDS_FLAG, count=count,
                          first_ts=header.base_timestamp, max_ts=high,
                          producer=(header.producer_id, header.producer_epoch, header.base_sequence))
    unpacked = 0 if codec == kafka_records.CODEC_NONE else len(plain)
    return stored, CheckedBatch(parse_header(stored), low, high), unpacked


def kafka_batches(data: bytes | memoryview, from_offset: int) -> tuple[bytes, int]:
    """Stored batches as Kafka record batches, one per stored batch with its offsets and leader
    epoch, and the number of records at or after ``from_offset`` they carry."""
    pieces: list[bytes | memoryview] = []
    count = 0
    view = memoryview(data)
    for position, header in iter_batches(view):
        batch = view[position:position + header.size_bytes]
        if header.next_offset <= from_offset:
            continue
        if header.attributes & KAFKA_RECORDS_FLAG:
            pieces += kafka_batch(batch, header)
            count += header.next_offset - max(from_offset, header.base_offset)
            continue
        records = take_records(batch, from_offset, header.record_count).records
        if not records:
            continue
        base = records[0].offset
        pieces.append(record_batch.encode_batch(
            base, [(r.timestamp, r.key, r.value, r.headers) for r in records],
            partition_leader_epoch=header.leader_epoch, offset_deltas=[r.offset - base for r in records]))
        count += len(records)
    return b"".join(pieces), count


def kafka_batch(batch: memoryview, header: BatchHeader) -> list[bytes | memoryview]:
    """A stored batch in Kafka's record format as the pieces of the Kafka batch it was (its
    records section is not copied here)."""
    section = batch[HEADER_SIZE:header.size_bytes]
    body = _pack_body(header.attributes & (CODEC_MASK | TIMESTAMP_TYPE_LOG_APPEND), header.last_offset_delta,
                      header.first_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
                      header.base_sequence, header.record_count)
    crc = crc32c.crc32c(section, value=crc32c.crc32c(body))
    prefix = _pack_prefix(header.base_offset, KAFKA_HEADER_BYTES - KAFKA_LOG_OVERHEAD + len(section),
                          header.leader_epoch, KAFKA_MAGIC, crc)
    return [prefix, body, section]
