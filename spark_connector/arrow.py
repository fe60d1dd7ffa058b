"""Raw record batches to Arrow record batches in the source's schema (pure, no I/O).

``ArrowBuilder`` turns each raw batch into Arrow columns, keeps only records with ``start <=
offset < end`` and emits ``pyarrow.RecordBatch`` objects of about ``rows_per_batch`` rows (fewer
when ``bytes_per_batch`` is reached first, so memory stays bounded whatever the record sizes).
Batches of the common shape go through the compiled decoder (``spark_connector.fastdecode``);
everything else through ``segments.batch.decode_columns``, which also gives the precise error for
a batch that is not valid. Timestamps go from milliseconds to Spark's microseconds. Headers become
a ``map<string,binary>``: a header name repeated within one record keeps its last value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

import numpy as np
import pyarrow as pa

from segments.batch import decode_columns, parse_header
from segments.errors import CorruptBatchError, InvalidBatchError
from spark_connector import fastdecode
from spark_connector.schema import arrow_schema

ROWS_PER_BATCH_DEFAULT: Final = 10_000
BYTES_PER_BATCH_DEFAULT: Final = 64 << 20
US_PER_MS: Final = 1000
Unreadable = Callable[[int, int, str], None]


class Chunk(NamedTuple):
    """One raw batch's records as Arrow columns (before slicing to the task's range)."""

    offsets: np.ndarray
    timestamps: np.ndarray
    keys: pa.Array
    values: pa.Array
    headers: pa.Array | None  # None: no record has headers


class ArrowBuilder:
    """Accumulates one partition's records for ``[start, end)`` and cuts Arrow batches."""

    def __init__(self, topic: str, partition: int, start: int, end: int, *,
                 rows_per_batch: int = ROWS_PER_BATCH_DEFAULT, bytes_per_batch: int = BYTES_PER_BATCH_DEFAULT,
                 on_unreadable: Unreadable | None = None) -> None:
        """``on_unreadable(first, after, reason)`` is told of the in-range offsets of a stored batch
        whose checksum holds but whose records cannot be decoded (stored before produce checked
        rows); it raises or lets the builder pass over them. None: such a batch is an error."""
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.on_unreadable = on_unreadable
        self.rows_per_batch, self.bytes_per_batch = rows_per_batch, bytes_per_batch
        self.next_offset = start  # every record below this was taken (or skipped as data loss)
        self.rows = 0
        self._chunks: list[Chunk] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def add_batch(self, batch: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """Decode one raw batch (checksum verified again) and yield any full Arrow batches."""
        try:
            chunk = to_chunk(batch)
        except CorruptBatchError:
            raise
        except InvalidBatchError as exc:
            if self.on_unreadable is None:
                raise
            header = parse_header(batch)
            first, after = max(self.next_offset, header.base_offset), min(header.next_offset, self.end)
            if first < after:
                self.on_unreadable(first, after, str(exc))
            self.next_offset = max(self.next_offset, after)
            return
        offsets = chunk.offsets
        if offsets[-1] < self.start or offsets[0] >= self.end:
            return
        if offsets[0] < self.start or offsets[-1] >= self.end:
            chunk = _slice(chunk, self.start, self.end)
        rows = len(chunk.offsets)
        if not rows:
            return
        self._chunks.append(chunk)
        self._pending_rows += rows
        self._pending_bytes += len(batch)
        self.next_offset = int(chunk.offsets[-1]) + 1
        if self._pending_rows >= self.rows_per_batch or self._pending_bytes >= self.bytes_per_batch:
            yield self._cut()

    def finish(self) -> Iterator[pa.RecordBatch]:
        if self._pending_rows:
            yield self._cut()

    def _cut(self) -> pa.RecordBatch:
        chunks, self._chunks = self._chunks, []
        count, self._pending_rows, self._pending_bytes = self._pending_rows, 0, 0
        self.rows += count
        single = len(chunks) == 1
        offsets = chunks[0].offsets if single else np.concatenate([c.offsets for c in chunks])
        stamps = chunks[0].timestamps if single else np.concatenate([c.timestamps for c in chunks])
        arrays = [
            _concat([c.keys for c in chunks]), _concat([c.values for c in chunks]),
            _repeated_string(self.topic, count), pa.array(np.full(count, self.partition, np.int32)),
            pa.array(offsets), pa.array(stamps * US_PER_MS, pa.timestamp("us", tz="UTC")), _headers(chunks, count),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema())


def to_chunk(batch: bytes | memoryview) -> Chunk:
    """Decode one raw batch into Arrow columns (compiled decoder when it takes the batch)."""
    fast = fastdecode.decode(batch)
    if fast is not None:
        return Chunk(fast.offsets, fast.timestamps,
                     _binary(fast.key_offsets, fast.key_data, fast.key_valid),
                     _binary(fast.value_offsets, fast.value_data, fast.value_valid), None)
    columns = decode_columns(batch)
    count = len(columns.offsets)
    headers = _header_map(columns.headers, count) if columns.has_headers else None
    try:
        stamps = np.fromiter(columns.timestamps, np.int64, count)
    except OverflowError as exc:
        raise InvalidBatchError(f"a record timestamp does not fit in 64 bits: {exc}") from None
    return Chunk(np.fromiter(columns.offsets, np.int64, count), stamps,
                 pa.array(list(columns.keys), pa.binary()), pa.array(list(columns.values), pa.binary()), headers)


def _binary(offsets: np.ndarray, data: np.ndarray, valid: np.ndarray) -> pa.Array:
    count = len(valid)
    nulls = count - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.BinaryArray.from_buffers(pa.binary(), count, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                       null_count=nulls)


def _slice(chunk: Chunk, start: int, end: int) -> Chunk:
    lo = int(np.searchsorted(chunk.offsets, start, side="left"))
    hi = int(np.searchsorted(chunk.offsets, end, side="left"))
    headers = None if chunk.headers is None else chunk.headers.slice(lo, hi - lo)
    return Chunk(chunk.offsets[lo:hi], chunk.timestamps[lo:hi], chunk.keys.slice(lo, hi - lo),
                 chunk.values.slice(lo, hi - lo), headers)


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _repeated_string(text: str, count: int) -> pa.Array:
    data = text.encode()
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data * count))


def _headers(chunks: list[Chunk], count: int) -> pa.Array:
    if all(c.headers is None for c in chunks):
        return _empty_maps(count)
    return pa.concat_arrays([c.headers if c.headers is not None else _empty_maps(len(c.offsets)) for c in chunks])


def _empty_maps(count: int) -> pa.Array:
    map_type = arrow_schema().field("headers").type
    return pa.MapArray.from_arrays(pa.array(np.zeros(count + 1, np.int32)), pa.array([], pa.string()),
                                   pa.array([], pa.binary()), type=map_type)


def _header_map(headers: tuple[tuple[tuple[str, bytes], ...], ...], count: int) -> pa.Array:
    map_type = arrow_schema().field("headers").type
    # A map holds each name once: when a record repeats a header name, its last value wins.
    pairs = [tuple(dict(h).items()) if len(h) > 1 else h for h in headers]
    lengths = np.fromiter(map(len, pairs), np.int32, count)
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = list(itertools.chain.from_iterable(pairs))
    names = pa.array([n for n, _ in flat], pa.string())
    values = pa.array([v for _, v in flat], pa.binary())
    return pa.MapArray.from_arrays(pa.array(offsets), names, values, type=map_type)
