"""What a consumer gets from one partition in one poll, as columns (``ConsumerBatch``), and the
per-record view of it (``ConsumerRecord``).

Decoding is where a consumer spends its time: a fetch of 4 MiB holds about 40,000 records of
100 bytes, and building one Python object per record costs more than fetching, checking and
unpacking them together. So the batch keeps the columns ``segments.batch.decode_columns`` makes
(offsets as a ``range`` when they have no gaps, one shared timestamp when the batch has one) and
builds ``ConsumerRecord`` objects only when iterated. Invariant: the columns have equal lengths,
offsets increase, and every record is at or after the offset the fetch asked for.

A fetched batch whose records cannot be decoded (stored before the broker checked every row at
produce) does not stop the consumer: the records before its first bad one are kept, the rest of it
is left out and named in ``ConsumerBatch.skipped``, and the batches after it are decoded as usual.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, TypeVar

from segments.batch import BatchHeader, RecordColumns, decode_columns, iter_batches
from segments.errors import InvalidBatchError
from segments.record_reader import iter_records


class ConsumerRecord(NamedTuple):
    """One record with the topic and partition it came from."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


# Builds a ConsumerRecord from a 7-tuple in C, several times faster than calling the class.
_make_record = functools.partial(tuple.__new__, ConsumerRecord)
T = TypeVar("T")


class SkippedRecords(NamedTuple):
    """Offsets ``[first_offset, next_offset)`` of a partition that a fetch passed over: a stored
    batch whose records cannot be decoded (``reason``)."""

    topic: str
    partition: int
    first_offset: int
    next_offset: int
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerBatch:
    """The records one fetch returned for one partition, column by column (index ``i`` of every
    column is record ``i``). Iterating gives ``ConsumerRecord`` objects, built on the way."""

    topic: str
    partition: int
    offsets: Sequence[int]
    timestamps: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    # Per record: () when it has no headers, else its (name, value) pairs.
    headers: Sequence[Sequence[tuple[str, bytes]]]
    # Stored records the fetch passed over because they cannot be decoded.
    skipped: tuple[SkippedRecords, ...] = ()

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        n = len(self.offsets)
        return map(_make_record, zip(itertools.repeat(self.topic, n), itertools.repeat(self.partition, n),
                                     self.offsets, self.timestamps, self.keys, self.values, map(list, self.headers),
                                     strict=True))

    def records(self) -> list[ConsumerRecord]:
        return list(self)

    @property
    def next_offset(self) -> int:
        """The offset after the last record (the position a consumer moves to)."""
        return self.offsets[-1] + 1


def decode_fetched(data: bytes | memoryview, topic: str, partition: int, from_offset: int) -> ConsumerBatch:
    """Verify and decode every batch in ``data`` (raw fetched batches of one partition) into one
    ``ConsumerBatch`` holding the records at or after ``from_offset``; a batch whose records cannot
    be decoded gives the records before its first bad one, the rest goes to ``skipped``."""
    view = memoryview(data)
    parts: list[RecordColumns] = []
    skipped: list[SkippedRecords] = []
    for position, header in iter_batches(view):
        if header.base_offset + header.last_offset_delta < from_offset:
            continue
        batch = view[position:position + header.size_bytes]
        try:
            parts.append(_from(decode_columns(batch), from_offset))
        except InvalidBatchError as exc:
            part, first = _salvaged(batch, header, from_offset)
            parts.append(part)
            if first < header.next_offset:
                skipped.append(SkippedRecords(topic, partition, first, header.next_offset, str(exc)))
    parts = [p for p in parts if len(p.offsets)]
    if len(parts) == 1:
        only = parts[0]
        return ConsumerBatch(topic, partition, only.offsets, only.timestamps, only.keys, only.values, only.headers,
                             tuple(skipped))
    return ConsumerBatch(topic, partition, _joined_offsets(parts),
                         _joined(p.timestamps for p in parts), _joined(p.keys for p in parts),
                         _joined(p.values for p in parts), _joined(p.headers for p in parts), tuple(skipped))


def _salvaged(batch: memoryview, header: BatchHeader, from_offset: int) -> tuple[RecordColumns, int]:
    """The records of an undecodable batch before its first bad one, as columns, and the first
    offset left out."""
    records = []
    try:
        for record in iter_records(batch, from_offset=from_offset):
            records.append(record)
    except InvalidBatchError:
        pass
    first = records[-1].offset + 1 if records else max(from_offset, header.base_offset)
    headers = tuple(tuple(r.headers) for r in records)
    return RecordColumns([r.offset for r in records], [r.timestamp for r in records],
                         tuple(r.key for r in records), tuple(r.value for r in records), headers,
                         any(headers)), first


def _from(columns: RecordColumns, from_offset: int) -> RecordColumns:
    """The records of one batch at or after ``from_offset`` (only a fetch's first batch can start
    before it, when the fetch asked for an offset inside that batch)."""
    if not columns.offsets or columns.offsets[0] >= from_offset:
        return columns
    start = bisect.bisect_left(columns.offsets, from_offset)
    return columns._replace(offsets=columns.offsets[start:], timestamps=columns.timestamps[start:],
                            keys=columns.keys[start:], values=columns.values[start:],
                            headers=columns.headers[start:])


def _joined_offsets(parts: list[RecordColumns]) -> Sequence[int]:
    ranges = [p.offsets for p in parts]
    if all(type(r) is range for r in ranges) and all(a[-1] + 1 == b[0] for a, b in itertools.pairwise(ranges)):
        return range(ranges[0][0], ranges[-1][-1] + 1) if ranges else range(0)
    return _joined(ranges)


def _joined(columns: Iterable[Sequence[T]]) -> tuple[T, ...]:
    return tuple(itertools.chain.from_iterable(columns))
