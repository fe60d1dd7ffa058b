"""Read-only access to a partition directory, without a running broker (the Spark connector's path).

The reader never writes: it does not recover, truncate or rebuild anything. It opens segment files
read-only, uses an index file only as a hint (checking the batch header it points at), verifies
every batch's checksum, and treats a batch that runs past the end of the last segment as a write
in progress (the end of the data), not as corruption. A segment deleted by retention while being
read is skipped. Reads stop at ``end_offset`` so callers can cap them at the high watermark.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator
from typing import final

from segments.batch import DEFAULT_RECORDS_BYTES_MAX, BatchHeader, Record, decode_records
from segments.checkpoint import HIGH_WATERMARK_FILE, read_offsets
from segments.errors import CorruptBatchError, InvalidArgumentError, OffsetOutOfRangeError
from segments.index import OffsetIndex
from segments.scan import BatchScan, ScanStop
from segments.segment import INDEX_SUFFIX, LOG_SUFFIX, segment_file_name

INDEX_BYTES_MAX_READONLY = 1 << 31


@final
class SegmentReader:
    """Iterate the batches and records of one partition directory from an offset up to a limit."""

    __slots__ = ("batch_bytes_max", "directory")

    def __init__(self, directory: str, *, batch_bytes_max: int = DEFAULT_RECORDS_BYTES_MAX) -> None:
        if not os.path.isdir(directory):
            raise InvalidArgumentError(f"{directory} is not a partition directory")
        self.directory = directory
        self.batch_bytes_max = batch_bytes_max

    def segment_bases(self) -> list[int]:
        names = os.listdir(self.directory)
        return sorted(int(n[:20]) for n in names if n.endswith(LOG_SUFFIX) and len(n) == 24 and n[:20].isdigit())

    def log_start_offset(self) -> int:
        bases = self.segment_bases()
        return bases[0] if bases else 0

    def log_end_offset(self) -> int:
        """Offset after the last complete batch (scans the last segment from its last index entry)."""
        bases = self.segment_bases()
        for base in reversed(bases):
            end = None
            for header, _ in self._iter_segment(base, base, last=True):
                end = header.next_offset
            if end is not None:
                return end
        return bases[0] if bases else 0

    def iter_batches(
        self, start_offset: int = 0, end_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Batches holding any offset in ``[start_offset, end_offset)``, each checksum-verified.

        The yielded memoryview is valid until the next iteration step."""
        if start_offset < 0 or (end_offset is not None and end_offset < start_offset):
            raise InvalidArgumentError(f"bad offset range [{start_offset}, {end_offset})")
        bases = self.segment_bases()
        if bases and start_offset < bases[0]:
            raise OffsetOutOfRangeError(start_offset, bases[0], -1)
        first = max(0, bisect.bisect_right(bases, start_offset) - 1)
        for i in range(first, len(bases)):
            if end_offset is not None and bases[i] >= end_offset:
                return
            for header, view in self._iter_segment(bases[i], start_offset, last=i == len(bases) - 1):
                if end_offset is not None and header.base_offset >= end_offset:
                    return
                if header.last_offset >= start_offset:
                    yield header, view

    def iter_records(self, start_offset: int = 0, end_offset: int | None = None, *,
                     opener: Callable[[memoryview], bytes | bytearray | memoryview] | None = None) -> Iterator[Record]:
        """Records with ``start_offset <= offset < end_offset``, in offset order; ``opener`` turns
        each stored batch into the one to decode (a batch encrypted at rest opened with the node's
        key ring; without it such a batch is ``UndecryptableBatchError``)."""
        for _, view in self.iter_batches(start_offset, end_offset):
            batch = view if opener is None else memoryview(opener(view))
            for record in decode_records(batch, size_bytes_max=self.batch_bytes_max):
                if record.offset >= start_offset and (end_offset is None or record.offset < end_offset):
                    yield record

    def _iter_segment(self, base: int, start_offset: int, *, last: bool) -> Iterator[tuple[BatchHeader, memoryview]]:
        path = os.path.join(self.directory, segment_file_name(base, LOG_SUFFIX))
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            position = self._start_position(fd, base, start_offset, size)
            scan = BatchScan(fd, position, size, size_bytes_max=self.batch_bytes_max, verify=True)
            for _, header, view in scan:
                assert view is not None
                yield header, view
            if scan.stop is ScanStop.CORRUPT or (scan.stop is ScanStop.TORN and not last):
                raise CorruptBatchError(
                    f"{path}: {scan.stop.value} batch at position {scan.stopped_at}: {scan.error}",
                    position=scan.stopped_at,
                )
        finally:
            os.close(fd)

    def _start_position(self, fd: int, base: int, start_offset: int, size: int) -> int:
        """Position of an indexed batch at or before ``start_offset`` (0 when the index is unusable)."""
        index_path = os.path.join(self.directory, segment_file_name(base, INDEX_SUFFIX))
        try:
            index = OffsetIndex(index_path, size_bytes_max=INDEX_BYTES_MAX_READONLY, writable=False)
        except (OSError, ValueError):
            return 0
        try:
            rel, position = index.lookup(max(0, start_offset - base))
        finally:
            index.close()
        if position == 0 or position >= size:
            return 0
        scan = BatchScan(fd, position, size, size_bytes_max=self.batch_bytes_max, verify=False)
        for _, header, _ in scan:
            return position if header.base_offset == base + rel else 0
        return 0


def high_watermarks(data_dir: str) -> dict[tuple[str, int], int]:
    """The broker's last checkpointed high watermark per (topic, partition) in ``data_dir``."""
    return read_offsets(os.path.join(data_dir, HIGH_WATERMARK_FILE))


def partition_directories(data_dir: str, topic: str) -> dict[int, str]:
    """``{partition: directory}`` for every ``<topic>-<partition>`` directory in ``data_dir``."""
    found = {}
    for name in os.listdir(data_dir):
        prefix, sep, number = name.rpartition("-")
        if sep and prefix == topic and number.isdigit() and os.path.isdir(os.path.join(data_dir, name)):
            found[int(number)] = os.path.join(data_dir, name)
    return found
