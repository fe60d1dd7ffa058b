"""Fixed-entry, memory-mapped sparse indexes of a segment.

An index holds entries of a constant size in a mapping pre-allocated to ``size_bytes_max``;
``is_full()`` tells the segment to roll, and ``trim()`` writes the valid entries to the file, cut
to size, when the segment is sealed or closed. Sealed indexes are mapped read-only from their
files. The active segment's index is an anonymous mapping written to its file only when sealed:
stores into a shared file mapping cost an ext4 page fault each time writeback has cleaned the page
(measured at ~16% of append time), and the active segment is rescanned after any unclean stop
anyway, so the file would never be trusted before it is sealed. Both kinds keep the relative offset
of a batch start:

- offset index: ``(relative_offset u32, position u32)``
- time index:   ``(timestamp i64, relative_offset u32)``

Invariants: entry 0, when present, is the segment's first batch (relative offset 0, position 0);
relative offsets strictly increase from entry to entry, so a pre-allocated file's zero tail is
found by a binary search for the first entry after 0 whose relative offset is 0. Entries are hints:
the segment checks the batch header found at an entry before trusting it.

Search favours the warm tail: consumers mostly read near the end of the log, whose index pages are
in the page cache, so the last ``WARM_ENTRIES`` entries are searched first when the target is there.
Concurrency: one writer (the owning segment, caller holds the log's lock); readers may search
concurrently with appends because an entry is written before the count that exposes it.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable
from typing import Final, final

OFFSET_ENTRY: Final = struct.Struct("<II")
TIME_ENTRY: Final = struct.Struct("<qI")
WARM_ENTRIES: Final = 1024
assert OFFSET_ENTRY.size == 8 and TIME_ENTRY.size == 12


def largest_at_most(key_at: Callable[[int], int], count: int, target: int, warm: int = WARM_ENTRIES) -> int:
    """Index of the last entry whose key is <= ``target`` (keys non-decreasing), or -1."""
    if count == 0 or key_at(0) > target:
        return -1
    lo, hi = 0, count - 1
    warm_start = max(0, count - warm)
    if key_at(warm_start) <= target:
        lo = warm_start
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if key_at(mid) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


def valid_entry_count(rel_offset_at: Callable[[int], int], capacity: int) -> int:
    """Number of entries before the zero tail of a pre-allocated index (see module invariants)."""
    if capacity <= 1:
        return capacity
    lo, hi = 1, capacity
    while lo < hi:
        mid = (lo + hi) // 2
        if rel_offset_at(mid) == 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


class MmapIndex:
    """A pre-allocated memory-mapped file of fixed-size entries."""

    __slots__ = (
        "_capacity",
        "_key_field",
        "_last",
        "_mm",
        "_rel_field",
        "_view",
        "entries",
        "entry",
        "path",
        "writable",
    )

    def __init__(self, path: str, entry: struct.Struct, key_field: int, rel_field: int, *,
                 size_bytes_max: int, writable: bool = True) -> None:
        assert size_bytes_max >= entry.size
        self.path = path
        self.entry = entry
        self._key_field = key_field
        self._rel_field = rel_field
        self.writable = writable
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None
        self.entries = 0
        self._last: tuple[int, int] | None = None
        if writable:
            self._open_writable(size_bytes_max)
        else:
            self._open_readonly()

    def _open_writable(self, size_bytes_max: int) -> None:
        """Map anonymous memory and load the file's entries into it (none if the file is bad)."""
        self._capacity = size_bytes_max // self.entry.size
        self._mm = mmap.mmap(-1, self._capacity * self.entry.size)
        self._view = memoryview(self._mm)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size % self.entry.size or size // self.entry.size > self._capacity:
                size = 0
            loaded = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        self._view[: len(loaded)] = loaded
        self.entries = valid_entry_count(self._rel_at, len(loaded) // self.entry.size)
        self._refresh_last()

    def _open_readonly(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._capacity = 0
            return
        try:
            size = os.fstat(fd).st_size
            self._capacity = size // self.entry.size
            if self._capacity:
                self._mm = mmap.mmap(fd, self._capacity * self.entry.size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        if self._mm is not None:
            self._view = memoryview(self._mm)
        self.entries = valid_entry_count(self._rel_at, self._capacity)
        self._refresh_last()

    def _refresh_last(self) -> None:
        self._last = self.entry_at(self.entries - 1) if self.entries else None

    def _rel_at(self, n: int) -> int:
        assert self._view is not None
        value: int = self.entry.unpack_from(self._view, n * self.entry.size)[self._rel_field]
        return value

    def _key_at(self, n: int) -> int:
        assert self._view is not None
        value: int = self.entry.unpack_from(self._view, n * self.entry.size)[self._key_field]
        return value

    def entry_at(self, n: int) -> tuple[int, int]:
        assert 0 <= n < self.entries and self._view is not None
        first, second = self.entry.unpack_from(self._view, n * self.entry.size)
        return first, second

    def columns(self) -> tuple[list[int], list[int]]:
        """Both fields of every valid entry, as two lists (for whole-index sanity checks)."""
        if not self.entries or self._view is None:
            return [], []
        rows = list(self.entry.iter_unpack(self._view[: self.entries * self.entry.size]))
        return [r[0] for r in rows], [r[1] for r in rows]

    def lookup(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return largest_at_most(self._key_at, self.entries, key)

    def is_full(self) -> bool:
        return self.entries >= self._capacity

    def free_entries(self) -> int:
        return self._capacity - self.entries

    def last(self) -> tuple[int, int] | None:
        return self._last

    def append(self, a: int, b: int) -> None:
        assert self.writable and self._view is not None and self.entries < self._capacity
        self.entry.pack_into(self._view, self.entries * self.entry.size, a, b)
        self.entries += 1
        self._last = (a, b)

    def truncate_entries(self, count: int) -> None:
        """Keep the first ``count`` entries and zero the rest, preserving the zero-tail invariant."""
        assert self.writable and self._view is not None and 0 <= count <= self.entries
        start, end = count * self.entry.size, self.entries * self.entry.size
        self._view[start:end] = bytes(end - start)
        self.entries = count
        self._refresh_last()

    def trim(self) -> None:
        """Write the valid entries to the file, cut to size, and map it read-only (seal)."""
        if not self.writable:
            return
        self.write_file()
        self.make_readonly()

    def write_file(self) -> None:
        """Write the valid entries to the file, cut to size; the index stays writable (a failure
        here, a full disk, changes nothing in memory)."""
        assert self.writable and self._view is not None
        valid = self._view[: self.entries * self.entry.size]
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                written = 0
                while written < len(valid):
                    written += os.write(fd, valid[written:])
            finally:
                os.close(fd)
        finally:
            valid.release()

    def make_readonly(self) -> None:
        """After ``write_file``: drop the writable mapping and map the file read-only."""
        assert self.writable
        self.close()
        self.writable = False
        self._open_readonly()

    def reopen(self) -> None:
        """Map a sealed index's file again after ``close`` (a released segment is used again)."""
        assert not self.writable and self._mm is None
        self._open_readonly()

    def close(self) -> None:
        """Unmap without writing anything (``trim`` is the only write). Idempotent."""
        if self._view is not None:
            self._view.release()
            self._view = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None


class _IndexFile:
    """What both index kinds delegate unchanged to their ``MmapIndex``."""

    __slots__ = ("_index",)

    def __init__(self, index: MmapIndex) -> None:
        self._index = index

    @property
    def entries(self) -> int:
        return self._index.entries

    @property
    def writable(self) -> bool:
        return self._index.writable

    def is_full(self) -> bool:
        return self._index.is_full()

    def free_entries(self) -> int:
        return self._index.free_entries()

    def last(self) -> tuple[int, int] | None:
        return self._index.last()

    def reset(self) -> None:
        self._index.truncate_entries(0)

    def trim(self) -> None:
        self._index.trim()

    def write_file(self) -> None:
        self._index.write_file()

    def make_readonly(self) -> None:
        self._index.make_readonly()

    def reopen(self) -> None:
        self._index.reopen()

    def close(self) -> None:
        self._index.close()


@final
class OffsetIndex(_IndexFile):
    """Sparse map from relative offset to the file position of a batch start."""

    __slots__ = ()

    def __init__(self, path: str, *, size_bytes_max: int, writable: bool = True) -> None:
        super().__init__(MmapIndex(path, OFFSET_ENTRY, 0, 0, size_bytes_max=size_bytes_max, writable=writable))

    def append(self, rel_offset: int, position: int) -> None:
        last = self._index.last()
        assert last is None or (rel_offset > last[0] and position > last[1])
        self._index.append(rel_offset, position)

    def is_sane(self, rel_offset_end: int, position_end: int, *, first_rel: int = 0) -> bool:
        """Entries strictly increase in both fields, start at (``first_rel``, 0) and stay inside
        the log (``first_rel``: the first batch's relative offset, above 0 after compaction)."""
        rels, positions = self._index.columns()
        if not rels:
            return True
        return (
            rels[0] == first_rel and positions[0] == 0
            and _strictly_increasing(rels) and _strictly_increasing(positions)
            and rels[-1] < rel_offset_end and positions[-1] < position_end
        )

    def lookup(self, rel_offset: int) -> tuple[int, int]:
        """``(relative_offset, position)`` of the last indexed batch at or before ``rel_offset``."""
        n = self._index.lookup(rel_offset)
        return (0, 0) if n < 0 else self._index.entry_at(n)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The last entry whose position is <= ``position`` (positions increase with offsets)."""
        view_key = self._position_at
        n = largest_at_most(view_key, self._index.entries, position)
        return (0, 0) if n < 0 else self._index.entry_at(n)

    def _position_at(self, n: int) -> int:
        return self._index.entry_at(n)[1]

    def truncate_to_position(self, position: int) -> None:
        """Drop every entry that points at or past ``position``."""
        n = largest_at_most(self._position_at, self._index.entries, position - 1)
        self._index.truncate_entries(n + 1)


@final
class TimeIndex(_IndexFile):
    """Sparse map from a batch's max timestamp (non-decreasing in the index) to relative offset."""

    __slots__ = ()

    def __init__(self, path: str, *, size_bytes_max: int, writable: bool = True) -> None:
        super().__init__(MmapIndex(path, TIME_ENTRY, 0, 1, size_bytes_max=size_bytes_max, writable=writable))

    def is_sane(self, rel_offset_end: int) -> bool:
        """Timestamps never decrease, relative offsets strictly increase and stay in the log."""
        stamps, rels = self._index.columns()
        if not rels:
            return True
        return stamps == sorted(stamps) and _strictly_increasing(rels) and rels[-1] < rel_offset_end

    def first(self) -> tuple[int, int] | None:
        return self._index.entry_at(0) if self._index.entries else None

    def maybe_append(self, timestamp: int, rel_offset: int) -> None:
        """Add an entry when the timestamp grows past the last entry's (keeps keys monotonic)."""
        last = self._index.last()
        if last is None or (timestamp > last[0] and rel_offset > last[1]):
            self._index.append(timestamp, rel_offset)

    def lookup(self, timestamp: int) -> int:
        """Relative offset from which to scan for the first batch with max timestamp >= target."""
        n = self._index.lookup(timestamp - 1)
        return 0 if n < 0 else self._index.entry_at(n)[1]

    def truncate_to_offset(self, rel_offset: int) -> None:
        """Drop every entry for a batch at or past ``rel_offset``."""
        n = largest_at_most(self._rel_at, self._index.entries, rel_offset - 1)
        self._index.truncate_entries(n + 1)

    def _rel_at(self, n: int) -> int:
        return self._index.entry_at(n)[1]


def _strictly_increasing(values: list[int]) -> bool:
    return values == sorted(values) and len(set(values)) == len(values)
