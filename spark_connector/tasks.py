"""What one Spark task reads: a partition's offsets ``[start, end)``, from segment files or over HTTP.

Invariant: a task yields each record with ``start <= offset < end`` exactly once, in offset order,
or fails; records it cannot find, or whose stored batch cannot be decoded, are data loss (raised,
or skipped with a warning when failOnDataLoss is false), never silently missing. ``end`` was
capped at the high watermark when the task was planned, so records past it (appended but not
committed) are never read.

The direct path reads segment files through ``segments.reader.SegmentReader``: read-only, every
checksum verified, a torn batch at the tail of the last segment (an append in progress) taken as
the end of the data, a segment deleted by retention mid-read skipped (and reported here as loss).
A batch encrypted at rest is opened with the key ring the ``encryptionKeysFile`` option names (a
path readable where tasks run: the plan carries the path, never the keys); one that cannot be
opened is an error whatever ``failOnDataLoss`` says, since the records are intact and readable
with the right key. The HTTP path fetches raw batches (``Accept: application/vnd.logbroker.batch``),
which the node has opened already.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Final

import pyarrow as pa

from segments.batch import ATTRIBUTES_OFFSET, ENCRYPTED_FLAG, iter_batches
from segments.encryption import open_batch
from segments.errors import OffsetOutOfRangeError, StorageError, UndecryptableBatchError
from segments.key_ring import KeyRingError, load_ring
from segments.reader import SegmentReader
from spark_connector.arrow import ArrowBuilder
from spark_connector.errors import DataLossError, ReadError
from spark_connector.http import HttpError, client_for
from spark_connector.options import Location

log = logging.getLogger(__name__)
FETCH_BYTES: Final = 8 << 20
RANGE_NOT_SATISFIABLE: Final = 416


@dataclasses.dataclass(frozen=True, slots=True)
class ReadTask:
    """Picklable description of one task's work (planned on the driver, run on an executor)."""

    location: Location
    directory: str
    topic: str
    partition: int
    start: int
    end: int
    fail_on_data_loss: bool
    # A compacted topic (decision 0324): offsets missing between records, or before the first
    # one, were removed by compaction, not lost.
    compacted: bool = False


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
    if task.start >= task.end:
        return iter(())
    return _read_direct(task) if task.location.direct else _read_http(task)


def lost(task: ReadTask, first: int, after: int, why: str) -> None:
    """Records ``[first, after)`` cannot be read: raise, or warn when loss is tolerated."""
    message = (f"topic {task.topic} partition {task.partition}: offsets {first}..{after - 1} cannot be read "
               f"({why})")
    if task.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them with a warning")
    log.warning("%s; skipped (failOnDataLoss=false)", message)


def _unreadable(task: ReadTask) -> Callable[[int, int, str], None]:
    """A stored batch whose records cannot be decoded is data loss to a reader, as in every other
    reader of the broker: an error, or passed over with a warning when loss is tolerated."""
    def report(first: int, after: int, reason: str) -> None:
        lost(task, first, after, f"their batch's records cannot be decoded: {reason}")
    return report


def _opener(task: ReadTask) -> Callable[[memoryview], bytes | memoryview]:
    """Sealed batches (encryption at rest) opened with the ring of ``encryptionKeysFile``; without
    it a sealed batch is an error that names the option (never ciphertext read as records)."""
    ring = None
    if task.location.keys_file is not None:
        try:
            ring = load_ring(task.location.keys_file)
        except KeyRingError as exc:
            raise ReadError(f"encryptionKeysFile: {exc}") from exc

    def open_one(view: memoryview) -> bytes | memoryview:
        if not view[ATTRIBUTES_OFFSET] & ENCRYPTED_FLAG:
            return view
        try:
            return memoryview(open_batch(view, ring))
        except UndecryptableBatchError as exc:
            hint = "" if ring is not None else "; give the node's key ring as the option encryptionKeysFile"
            raise ReadError(f"topic {task.topic} partition {task.partition}: {exc}{hint}") from exc
    return open_one


def _read_direct(task: ReadTask) -> Iterator[pa.RecordBatch]:
    reader = SegmentReader(task.directory)
    open_one = _opener(task)
    builder = ArrowBuilder(task.topic, task.partition, task.start, task.end, on_unreadable=_unreadable(task))
    start = task.start
    earliest = reader.log_start_offset()
    if start < earliest:
        if not task.compacted:
            lost(task, start, min(earliest, task.end), "deleted by retention before they were read")
        start = builder.next_offset = min(earliest, task.end)
    try:
        for header, view in reader.iter_batches(start, task.end):
            if header.base_offset > builder.next_offset and not task.compacted:
                lost(task, builder.next_offset, header.base_offset, "a segment was deleted while being read")
                builder.next_offset = header.base_offset
            yield from builder.add_batch(open_one(view))
    except OffsetOutOfRangeError as exc:
        lost(task, builder.next_offset, task.end, f"deleted by retention while being read: {exc}")
    except StorageError as exc:
        raise ReadError(f"{task.directory}: {exc}") from exc
    yield from builder.finish()
    if builder.next_offset < task.end and not task.compacted:
        lost(task, builder.next_offset, task.end, "the partition's files end before the planned offsets")


def _read_http(task: ReadTask) -> Iterator[pa.RecordBatch]:
    builder = ArrowBuilder(task.topic, task.partition, task.start, task.end, on_unreadable=_unreadable(task))
    location = task.location
    with client_for(location) as client:
        offset = task.start
        while offset < task.end:
            try:
                data, next_offset, _ = client.fetch_batches(task.topic, task.partition, offset, FETCH_BYTES)
            except HttpError as exc:
                earliest = exc.problem.get("earliest")
                if exc.status != RANGE_NOT_SATISFIABLE or not isinstance(earliest, int) or earliest <= offset:
                    raise
                if not task.compacted:
                    lost(task, offset, min(earliest, task.end), "deleted by retention before they were read")
                offset = builder.next_offset = min(earliest, task.end)
                continue
            if not data and task.compacted:
                break  # compaction removed the rest of the range
            if not data:
                raise ReadError(f"{location.url}: topic {task.topic} partition {task.partition} returned no records "
                                f"at offset {offset}, below the planned end {task.end}")
            view = memoryview(data)
            for position, header in iter_batches(view):
                yield from builder.add_batch(view[position:position + header.size_bytes])
            progress = max(next_offset, builder.next_offset)
            if progress <= offset:
                raise ReadError(f"{location.url}: no progress past offset {offset} (next offset {next_offset})")
            offset = progress
    yield from builder.finish()
