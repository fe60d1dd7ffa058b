"""Helpers of the compaction tests: keyed batches, and a compacted log read back by key."""

from __future__ import annotations

from segments.batch import ProducerRecord, Record, decode_records, encode_batch, iter_batches
from segments.log import PartitionLog


def keyed_batch(rows: list[tuple[bytes, bytes | None]], timestamp: int) -> bytes:
    return encode_batch([ProducerRecord(value, key=key, timestamp=timestamp) for key, value in rows])


def read_records(log: PartitionLog) -> list[Record]:
    """Every record from the log start on, reading across gaps until a read comes back empty."""
    offset = log.log_start_offset
    out: list[Record] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        if not len(result.data):
            break
        assert result.next_offset > offset
        for position, header in iter_batches(result.data):
            batch = result.data[position : position + header.size_bytes]
            out.extend(r for r in decode_records(batch) if r.offset >= offset)
        offset = result.next_offset
    return out


def latest_values(records: list[Record]) -> dict[bytes, bytes]:
    """Key to latest value, tombstones deleting their key (what a compacted topic's reader rebuilds)."""
    state: dict[bytes, bytes] = {}
    for record in records:
        if record.key is None:
            continue
        if record.value is None:
            state.pop(record.key, None)
        else:
            state[record.key] = record.value
    return state
