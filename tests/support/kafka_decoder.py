"""The reference decoder of Kafka record batches v2, for tests and tools: whole batches back to back,
records included, as Kafka's ``DefaultRecordBatch`` reads them. The broker itself never decodes a
Kafka batch whole (Produce checks its header with ``kafka_api.record_batch.checked_header`` and its
records section with ``segments.kafka_records``; Fetch gives stored sections back unchanged), so this
lives with the tests, which read what the broker's Kafka paths write with it.

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

Not supported: transactional and control batches (``UnsupportedBatch``) and codecs other than 0-4
(``UnsupportedCompression``). ``max_timestamp`` is returned as written, not checked: Kafka brokers
recompute it too. Pure functions: no I/O, no clock, no shared mutable state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kafka_api.record_batch import COMPRESSION_NONE, RecordBatchError, checked_header
from segments import kafka_records
from segments.errors import InvalidBatchError
from segments.kafka_records import KAFKA_HEADER_BYTES

_CODEC_MASK: Final = 0x07
_LOG_APPEND_TIME_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20


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


class _Allowance:
    """What one ``decode_batches`` call may still produce."""

    __slots__ = ("bytes_left", "records_left")

    def __init__(self, records_left: int, bytes_left: int) -> None:
        self.records_left = records_left
        self.bytes_left = bytes_left


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


def _decode_batch(view: memoryview, position: int, allowance: _Allowance) -> tuple[KafkaBatch, int]:
    """Decode the batch at ``position``; returns it and its size in bytes."""
    where = f"batch at position {position}"
    header, batch_bytes = checked_header(view, position)
    (base_offset, _, leader_epoch, _, _, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, count) = header
    end = position + batch_bytes
    _check_count(count, last_offset_delta, allowance, where)
    section = view[position + KAFKA_HEADER_BYTES : end]
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


def _check_count(count: int, last_offset_delta: int, allowance: _Allowance, where: str) -> None:
    if count < 0:
        raise RecordBatchError(f"{where}: negative record count {count}")
    if last_offset_delta != count - 1:
        raise RecordBatchError(f"{where}: last_offset_delta {last_offset_delta} with {count} records, want {count - 1}")
    if count > allowance.records_left:
        raise RecordBatchError(f"{where}: {count} records exceed the {allowance.records_left} still allowed")


def _decompress(codec: int, section: memoryview, allowance: _Allowance, where: str) -> bytes:
    """Decompress a records section, producing at most ``allowance.bytes_left`` bytes, and charge it."""
    try:
        payload = bytes(kafka_records.decompress(codec, section, allowance.bytes_left))
    except InvalidBatchError as exc:  # RecordsTooLargeError too
        raise RecordBatchError(f"{where}: {exc}") from None
    assert len(payload) <= allowance.bytes_left, (len(payload), allowance.bytes_left)
    allowance.bytes_left -= len(payload)
    return payload

