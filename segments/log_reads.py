"""Where a read of a partition log finds its batches, and what it hands back.

``LogRead`` (bytes) and ``LogSlice`` (a descriptor, for ``sendfile``) are the two answers of
``PartitionLog.read`` and ``slice``. The lookups are pure functions over the log's segment list
(sorted by base offset, never overlapping) and its parallel list of base offsets; the caller
holds the log's lock so the lists do not change meanwhile. A read returns whole batches only, and
none that reaches its exclusive limit (``offset_max``, capped at the log end).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from typing import NamedTuple, final

from segments.errors import InvalidArgumentError, OffsetOutOfRangeError, check_int
from segments.segment import Extent, LogSegment


class LogRead(NamedTuple):
    """Whole batches read from the log; ``next_offset`` is where the next read starts."""

    data: memoryview
    first_offset: int
    next_offset: int


@final
class LogSlice:
    """Whole batches of one segment, for a zero-copy sender: a descriptor of its own (closed by
    ``close``), a position and a size. Survives the segment being deleted meanwhile."""

    __slots__ = ("fd", "first_offset", "next_offset", "position", "size_bytes")

    def __init__(self, fd: int, extent: Extent) -> None:
        self.fd = fd
        self.position = extent.position
        self.size_bytes = extent.size_bytes
        self.first_offset = extent.first_offset
        self.next_offset = extent.next_offset

    def read(self) -> bytes:
        return os.pread(self.fd, self.size_bytes, self.position)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> LogSlice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_limit(segments: list[LogSegment], offset: int, size_bytes_max: int, offset_max: int | None) -> int:
    """Validate a read's arguments; return the exclusive offset limit of the read."""
    check_int("offset", offset)
    check_int("size_bytes_max", size_bytes_max)
    if size_bytes_max < 0:
        raise InvalidArgumentError(f"size_bytes_max must not be negative, not {size_bytes_max}")
    start, end = segments[0].base_offset, segments[-1].next_offset
    if not start <= offset <= end:
        raise OffsetOutOfRangeError(offset, start, end)
    return end if offset_max is None else min(offset_max, end)


def candidates(segments: list[LogSegment], bases: list[int], offset: int,
               limit: int) -> Iterator[tuple[LogSegment, int]]:
    """Segments that may hold ``offset`` or the first offset after it, in order (gaps skip)."""
    i = max(0, bisect.bisect_right(bases, offset) - 1)
    for segment in segments[i:]:
        target = max(offset, segment.base_offset)
        if target >= limit:
            return
        yield segment, target


def find_extent(segments: list[LogSegment], bases: list[int], offset: int, size_bytes_max: int,
                limit: int) -> tuple[LogSegment, Extent] | None:
    """The segment and the extent of the whole batches a read from ``offset`` returns (None: none)."""
    for segment, target in candidates(segments, bases, offset, limit):
        extent = segment.extent(target, size_bytes_max, limit)
        if extent is not None:
            return segment, extent
        if segment.next_offset > target:
            return None
    return None
