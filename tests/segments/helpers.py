"""Helpers shared by the storage tests: building batches and reading a log back as records."""

from __future__ import annotations

from segments.batch import ProducerRecord, decode_records, encode_batch, iter_batches
from segments.log import PartitionLog


def batch_of(values: list[bytes], timestamp: int = 1_000, key: bytes | None = None) -> bytes:
    return encode_batch([ProducerRecord(v, key=key, timestamp=timestamp) for v in values])


def read_all(log: PartitionLog, start: int | None = None, size_bytes_max: int = 1 << 20) -> list[tuple[int, bytes]]:
    """Every ``(offset, value)`` from ``start`` (default: log start) to the log end."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, size_bytes_max)
        assert result.next_offset > offset, "a read at a valid offset below the end must progress"
        for position, header in iter_batches(result.data):
            batch = result.data[position : position + header.size_bytes]
            out.extend((r.offset, r.value) for r in decode_records(batch) if r.offset >= offset)
        offset = result.next_offset
    return out
