"""Raw record batches to Arrow record batches in the source's schema (pure, no I/O).

``ArrowBuilder`` collects decoded columns (``segments.batch.decode_columns``) and emits
``pyarrow.RecordBatch`` objects of about ``rows_per_batch`` rows, keeping only records with
``start <= offset < end``. Columns are built from Python lists in one call each (the fast way into
Arrow); timestamps go from milliseconds to Spark's microseconds. Headers become a
``map<string,binary>``: a header name repeated within one record keeps its last value.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Final

import numpy as np
import pyarrow as pa

from segments.batch import RecordColumns, decode_columns
from spark_connector.schema import arrow_schema

ROWS_PER_BATCH_DEFAULT: Final = 10_000
US_PER_MS: Final = 1000


class ArrowBuilder:
    """Accumulates one partition's records for ``[start, end)`` and cuts Arrow batches."""

    def __init__(self, topic: str, partition: int, start: int, end: int, *,
                 rows_per_batch: int = ROWS_PER_BATCH_DEFAULT) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.rows_per_batch = rows_per_batch
        self.next_offset = start  # every record below this was taken (or skipped as data loss)
        self.rows = 0
        self._parts: list[RecordColumns] = []
        self._pending = 0

    def add_batch(self, batch: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """Decode one raw batch (checksum verified again) and yield any full Arrow batches."""
        columns = decode_columns(batch)
        offsets = columns.offsets
        lo, hi = offsets[0], offsets[-1]
        if hi < self.start or lo >= self.end:
            return
        if lo < self.start or hi >= self.end:
            columns = _slice(columns, self.start, self.end)
            if not columns.offsets:
                return
        self._parts.append(columns)
        self._pending += len(columns.offsets)
        self.next_offset = columns.offsets[-1] + 1
        if self._pending >= self.rows_per_batch:
            yield self._cut()

    def finish(self) -> Iterator[pa.RecordBatch]:
        if self._pending:
            yield self._cut()

    def _cut(self) -> pa.RecordBatch:
        parts, self._parts, count, self._pending = self._parts, [], self._pending, 0
        self.rows += count
        keys = list(itertools.chain.from_iterable(p.keys for p in parts))
        values = list(itertools.chain.from_iterable(p.values for p in parts))
        offsets = np.fromiter(itertools.chain.from_iterable(p.offsets for p in parts), np.int64, count)
        stamps = np.fromiter(itertools.chain.from_iterable(p.timestamps for p in parts), np.int64, count)
        topic = _repeated_string(self.topic, count)
        arrays = [
            pa.array(keys, pa.binary()), pa.array(values, pa.binary()), topic,
            pa.array(np.full(count, self.partition, np.int32)), pa.array(offsets),
            pa.array(stamps * US_PER_MS, pa.timestamp("us", tz="UTC")), _headers(parts, count),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema())


def _slice(columns: RecordColumns, start: int, end: int) -> RecordColumns:
    keep = [i for i, o in enumerate(columns.offsets) if start <= o < end]
    lo, hi = (keep[0], keep[-1] + 1) if keep else (0, 0)
    return RecordColumns(list(columns.offsets[lo:hi]), list(columns.timestamps[lo:hi]), columns.keys[lo:hi],
                         columns.values[lo:hi], columns.headers[lo:hi], columns.has_headers)


def _repeated_string(text: str, count: int) -> pa.Array:
    data = text.encode()
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(len(data))
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data * count))


def _headers(parts: list[RecordColumns], count: int) -> pa.Array:
    map_type = arrow_schema().field("headers").type
    if not any(p.has_headers for p in parts):
        return pa.MapArray.from_arrays(pa.array(np.zeros(count + 1, np.int32)), pa.array([], pa.string()),
                                       pa.array([], pa.binary()), type=map_type)
    # A map holds each name once: when a record repeats a header name, its last value wins.
    every = itertools.chain.from_iterable(p.headers for p in parts)
    pairs = [tuple(dict(h).items()) if len(h) > 1 else h for h in every]
    lengths = np.fromiter(map(len, pairs), np.int32, count)
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = list(itertools.chain.from_iterable(pairs))
    names = pa.array([n for n, _ in flat], pa.string())
    values = pa.array([v for _, v in flat], pa.binary())
    return pa.MapArray.from_arrays(pa.array(offsets), names, values, type=map_type)
