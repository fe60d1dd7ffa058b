"""One segment of a partition log: ``<base>.log`` plus its sparse ``.index`` and ``.timeindex``.

Invariant: ``base_offset`` <= every offset stored in the segment, and every batch's offsets lie
in ``[base_offset, next_offset)``; batches are stored back to back in offset order, so positions
and offsets increase together. Index entries point at batch starts.

Concurrency: not thread-safe. The owning ``PartitionLog`` holds its lock around every call; reads
use ``os.pread`` and never move a file position, so they need no further ordering.

Descriptors: a sealed segment may be *released* (its log descriptor closed, its index mappings
unmapped) by the node's ``SegmentHandles`` budget; ``fd`` and every read entry point reopen it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable
from typing import NamedTuple, final

from segments.batch import (
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_PREFIX_SIZE,
    U32_MAX,
    BatchHeader,
    check_header,
    parse_header,
)
from segments.config import LogConfig
from segments.errors import InvalidBatchError, LogClosedError, StorageError, TooManyOpenFilesError, is_fd_limit
from segments.handles import LogHandles
from segments.index import OffsetIndex, TimeIndex
from segments.scan import BatchScan, ScanStop

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
NO_TIMESTAMP = -(1 << 63)
LENGTH_PREFIX = struct.Struct("<QI")
LAST_DELTA = struct.Struct("<I")


class SegmentWriteError(StorageError):
    """A failed append whose partial bytes could not be removed: the segment now ends in
    garbage, and nothing may be appended after it (the owning log goes offline)."""

    code = "segment_write_failed"

    def __init__(self, path: str, position: int, cause: OSError) -> None:
        super().__init__(f"{path}: a failed write ({cause}) left it unusable at position {position}"
                         " (could not be cut back, or its indexes could not be sealed)")
        self.cause = cause


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class SegmentRecovery(NamedTuple):
    """What recovering one segment found: valid bytes kept, bytes cut and why."""

    valid_bytes: int
    truncated_bytes: int
    batches: int
    stop: ScanStop
    error: str | None
    epoch_starts: tuple[tuple[int, int], ...] = ()  # (leader epoch, offset) where each run of one epoch starts


class Extent(NamedTuple):
    """A byte range of whole batches in a segment file, and the offsets it covers."""

    position: int
    size_bytes: int
    first_offset: int
    next_offset: int


@final
class LogSegment:
    __slots__ = (
        "_bytes_since_index",
        "_fd",
        "_fsync",
        "_handles",
        "_indexes_full",
        "_offset_index",
        "_read_hint",
        "_released",
        "_time_index",
        "base_offset",
        "config",
        "directory",
        "log_path",
        "max_timestamp",
        "next_offset",
        "rolling_timestamp",
        "size_bytes",
    )

    def __init__(self, directory: str, base_offset: int, config: LogConfig, *,
                 fsync: Callable[[int], None] = os.fsync, handles: LogHandles[LogSegment] | None = None) -> None:
        """Open (creating if absent) the files; call ``recover()`` or ``load()`` before use."""
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self._fsync = fsync
        self._handles = handles
        self._released = False
        self.log_path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._offset_index = OffsetIndex(self._path(INDEX_SUFFIX), size_bytes_max=config.segment_index_bytes)
            try:
                self._time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX), size_bytes_max=config.segment_index_bytes)
            except BaseException:
                self._offset_index.close()
                raise
            self.size_bytes = os.fstat(self._fd).st_size
        except BaseException:
            os.close(self._fd)
            raise
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.rolling_timestamp = NO_TIMESTAMP
        self._bytes_since_index = 0
        # (offset, position) of the batch after the last read: sequential readers skip the index.
        self._read_hint = (-1, -1)
        self._indexes_full = False

    def _path(self, suffix: str) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, suffix))

    @property
    def fd(self) -> int:
        if self._fd < 0:
            if not self._released:
                raise LogClosedError(f"segment {self.log_path} is closed")
            self._reacquire()
        return self._fd

    def _use(self) -> None:
        """A read starts here: reopen the files if they were released, and tell the budget."""
        if self._released:
            self._reacquire()
        elif self._handles is not None and not self._offset_index.writable:
            self._handles.touched(self)

    def _reacquire(self) -> None:
        try:
            fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            if is_fd_limit(exc):
                raise TooManyOpenFilesError(f"cannot reopen {self.log_path}: {exc}") from exc
            raise
        try:
            self._offset_index.reopen()
            self._time_index.reopen()
        except BaseException as exc:
            self._offset_index.close()
            os.close(fd)
            if is_fd_limit(exc):
                raise TooManyOpenFilesError(f"cannot map the indexes of {self.log_path}: {exc}") from exc
            raise
        self._fd = fd
        self._released = False
        if self._handles is not None:
            self._handles.opened(self)

    def release(self) -> None:
        """Close the descriptors of a sealed segment until its next use (the owning log holds
        its lock and has checked that no fsync is due)."""
        assert self.sealed and self._fd >= 0
        self._offset_index.close()
        self._time_index.close()
        os.close(self._fd)
        self._fd = -1
        self._released = True
        if self._handles is not None:
            self._handles.forget(self)

    # ---- opening -------------------------------------------------------------------------

    def recover(self) -> SegmentRecovery:
        """Scan every batch, verify checksums, rebuild both indexes and cut the file at the
        first bad batch. Returns what was kept and what was cut."""
        self._offset_index.reset()
        self._time_index.reset()
        self._reset_state()
        file_size = os.fstat(self.fd).st_size
        scan = BatchScan(self.fd, 0, file_size, size_bytes_max=self.config.max_batch_bytes, verify=True)
        batches = 0
        expected = self.base_offset
        starts: list[tuple[int, int]] = []
        for position, header, _ in scan:
            if header.base_offset < expected or header.last_offset - self.base_offset > U32_MAX:
                scan.stop, scan.error = ScanStop.CORRUPT, InvalidBatchError(
                    f"batch at position {position} has offset {header.base_offset} below {expected}")
                break
            self._index_batch(position, header.base_offset, header)
            expected = header.next_offset
            batches += 1
            if not starts or starts[-1][0] != header.leader_epoch:
                starts.append((header.leader_epoch, header.base_offset))
        valid = scan.stopped_at if scan.stop is not ScanStop.END else file_size
        truncated = file_size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
        self.size_bytes = valid
        return SegmentRecovery(valid, truncated, batches, scan.stop, str(scan.error) if scan.error else None,
                               tuple(starts))

    def load(self) -> bool:
        """Trust the indexes of a cleanly closed segment: check the last indexed batch and read
        the batches after it. Returns False when the indexes disagree with the log or miss
        entries, so that the caller recovers the segment (which resets all state) instead."""
        last = self._offset_index.last()
        if self.size_bytes == 0:
            return last is None
        if last is None:
            return False
        rel, position = last
        header = self.read_header(position)
        if header is None or header.base_offset != self.base_offset + rel:
            return False
        first = self.read_header(0)
        # Compaction may have removed the first records: the first batch starts at or after the base.
        if first is None or first.base_offset < self.base_offset:
            return False
        first_rel = first.base_offset - self.base_offset
        time_last = self._time_index.last()
        if self._time_index.first() != (first.max_timestamp, first_rel) or time_last is None:
            return False
        self.rolling_timestamp = first.max_timestamp
        self.max_timestamp = time_last[0]
        scan = BatchScan(self.fd, position, self.size_bytes, size_bytes_max=self.config.max_batch_bytes, verify=True)
        end = None
        for pos, header, _ in scan:
            if pos - position >= self.config.index_interval_bytes and pos > position:
                return False  # the index lacks an entry it should have: rebuild it
            self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
            end = header.next_offset
            self._bytes_since_index = pos + header.size_bytes - position
        if scan.stop is not ScanStop.END or end is None:
            return False
        rel_end = end - self.base_offset
        if not (self._offset_index.is_sane(rel_end, self.size_bytes, first_rel=first_rel)
                and self._time_index.is_sane(rel_end)):
            return False
        self.next_offset = end
        self._indexes_full = self._offset_index.is_full() or self._time_index.is_full()
        return True

    def _reset_state(self) -> None:
        self._indexes_full = False
        self.size_bytes = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.rolling_timestamp = NO_TIMESTAMP
        self._bytes_since_index = 0

    # ---- writing -------------------------------------------------------------------------

    def should_roll(self, header: BatchHeader, next_offset: int) -> bool:
        """True when a batch of this size/offset range cannot or should not go into this segment.

        Age is measured in record time, as Kafka does: the incoming batch's max timestamp against
        the segment's first batch, so a producer's old timestamps cannot force a roll per batch."""
        if self.size_bytes == 0:
            return False
        return (
            self.size_bytes + header[1] + LENGTH_PREFIX_SIZE > self.config.segment_bytes
            or self._indexes_full
            or next_offset + header[6] - self.base_offset > U32_MAX
            or header[8] - self.rolling_timestamp >= self.config.segment_ms
        )

    def fits_after(self, header: BatchHeader, base_offset: int, pending_bytes: int, pending_batches: int) -> bool:
        """True when a batch can follow ``pending_batches`` batches (``pending_bytes``) that are
        headed for this segment and not written yet, none of them making it roll: what
        ``should_roll`` would say once they are written, counting one index entry per batch."""
        return (
            self.size_bytes > 0
            and not self._indexes_full
            and self.size_bytes + pending_bytes + header[1] + LENGTH_PREFIX_SIZE <= self.config.segment_bytes
            and self._offset_index.free_entries() > pending_batches
            and self._time_index.free_entries() > pending_batches
            and base_offset + header[6] - self.base_offset <= U32_MAX
            and header[8] - self.rolling_timestamp < self.config.segment_ms
        )

    def append_run(self, run: memoryview, batches: list[tuple[BatchHeader, int]]) -> None:
        """Append whole batches stored as they are (a follower's copies), back to back in
        ``run``, with one write; ``batches`` are their headers and base offsets, in order. On a
        failed write nothing of the run stays (as ``append``)."""
        position = self.size_bytes
        assert batches and batches[0][1] >= self.next_offset
        try:
            written = os.write(self.fd, run)
            if written != len(run):
                _finish_short_write(self.fd, b"", run, written)
        except OSError as exc:
            self._cut_back(position, exc)
            raise
        for header, base_offset in batches:
            self._index_batch(position, base_offset, header)
            position += header[1] + LENGTH_PREFIX_SIZE

    def append(self, prefix: bytes, body: memoryview, header: BatchHeader, base_offset: int) -> int:
        """Append one batch at ``base_offset`` whose first 16 bytes are replaced by ``prefix``
        (the patched offset and epoch); return its position."""
        size = header.batch_length + LENGTH_PREFIX_SIZE
        assert len(prefix) + len(body) == size and base_offset >= self.next_offset
        position = self.size_bytes
        try:
            written = os.writev(self.fd, [prefix, body])
            if written != size:
                _finish_short_write(self.fd, prefix, body, written)
        except OSError as exc:
            self._cut_back(position, exc)
            raise
        self._index_batch(position, base_offset, header)
        return position

    def _cut_back(self, position: int, cause: OSError) -> None:
        """Remove whatever a failed write left after ``position`` (the last whole batch), so the
        next append does not land behind a torn batch that recovery would cut it off with.
        Raises ``SegmentWriteError`` when the file cannot be brought back to ``position``."""
        try:
            os.ftruncate(self.fd, position)
            size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise SegmentWriteError(self.log_path, position, cause) from exc
        if size != position:
            raise SegmentWriteError(self.log_path, position, cause)

    def _index_batch(self, position: int, base_offset: int, header: BatchHeader) -> None:
        rel = base_offset - self.base_offset
        max_timestamp = header.max_timestamp
        if position == 0:
            self.rolling_timestamp = max_timestamp
        if position == 0 or self._bytes_since_index >= self.config.index_interval_bytes:
            self._offset_index.append(rel, position)
            self._time_index.maybe_append(max(self.max_timestamp, max_timestamp), rel)
            self._bytes_since_index = 0
            self._indexes_full = self._offset_index.is_full() or self._time_index.is_full()
        size = header.batch_length + LENGTH_PREFIX_SIZE
        self._bytes_since_index += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
        self.size_bytes = position + size
        self.next_offset = base_offset + header.last_offset_delta + 1

    # ---- reading -------------------------------------------------------------------------

    def read_header(self, position: int) -> BatchHeader | None:
        """The checked header at ``position``, or None when there is no sane header there."""
        if position < 0 or position + HEADER_SIZE > self.size_bytes:
            return None
        header = parse_header(os.pread(self.fd, HEADER_SIZE, position))
        try:
            check_header(header, size_bytes_max=self.config.max_batch_bytes, position=position)
        except InvalidBatchError:
            return None
        if position + header.size_bytes > self.size_bytes:
            return None
        return header

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        if offset >= self.next_offset:
            return None
        self._use()
        hint_offset, hint_position = self._read_hint
        if offset == hint_offset:
            header = self.read_header(hint_position)
            if header is not None and header.base_offset == offset:
                return hint_position, header
        rel, position = self._offset_index.lookup(max(0, offset - self.base_offset))
        header = self.read_header(position)
        if header is None or header.base_offset != self.base_offset + rel:
            position = 0
        while position < self.size_bytes:
            header = self.read_header(position)
            if header is None:
                return None
            if header.last_offset >= offset:
                return position, header
            position += header.size_bytes
        return None

    def _first_batch(self, offset: int, offset_max: int) -> tuple[int, BatchHeader] | None:
        """The batch a read at ``offset`` starts with, unless it reaches ``offset_max``."""
        found = self.locate(offset)
        if found is None or found[1].last_offset >= offset_max:
            return None
        return found

    def extent(self, offset: int, size_bytes_max: int, offset_max: int) -> Extent | None:
        """Whole batches from the one holding ``offset``: at most ``size_bytes_max`` bytes (but at
        least one batch) and only batches that end below ``offset_max`` (the high watermark)."""
        found = self._first_batch(offset, offset_max)
        if found is None:
            return None
        start, first = found
        limit = start + max(size_bytes_max, first.size_bytes)
        if offset_max >= self.next_offset and limit >= self.size_bytes:
            return Extent(start, self.size_bytes - start, first.base_offset, self.next_offset)
        end, end_offset = self._jump(start, first, limit, offset_max)
        while end < self.size_bytes:
            header = self.read_header(end)
            if header is None or end + header.size_bytes > limit or header.last_offset >= offset_max:
                break
            end += header.size_bytes
            end_offset = header.next_offset
        return Extent(start, end - start, first.base_offset, end_offset)

    def read_batches(self, offset: int, size_bytes_max: int, offset_max: int) -> tuple[memoryview, int, int] | None:
        """Like ``extent`` but returns the bytes: one ``pread`` of up to ``size_bytes_max``, then a
        walk over the headers in memory to cut at the last whole batch below ``offset_max``.
        Returns ``(data, first_offset, next_offset)``."""
        found = self._first_batch(offset, offset_max)
        if found is None:
            return None
        start, first = found
        want = min(max(size_bytes_max, first.size_bytes), self.size_bytes - start)
        data = memoryview(os.pread(self.fd, want, start))
        if offset_max >= self.next_offset and start + want == self.size_bytes:
            end, next_offset = want, self.next_offset
        else:
            end, next_offset = _whole_batches(data, offset_max)
        self._read_hint = (next_offset, start + end)
        return data[:end], first.base_offset, next_offset

    def _jump(self, start: int, first: BatchHeader, limit: int, offset_max: int) -> tuple[int, int]:
        """Use the offset index to skip most of the headers between ``start`` and ``limit``."""
        end, end_offset = start + first.size_bytes, first.next_offset
        by_position = self._offset_index.lookup_position(limit)
        by_offset = self._offset_index.lookup(offset_max - self.base_offset)
        rel, position = min(by_position, by_offset)
        if position > end and self.base_offset + rel <= offset_max:
            header = self.read_header(position)
            if header is not None and header.base_offset == self.base_offset + rel:
                return position, header.base_offset
        return end, end_offset

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """Base offset of the first batch whose max timestamp is >= ``timestamp``."""
        if self.max_timestamp < timestamp:
            return None
        self._use()
        rel = self._time_index.lookup(timestamp)
        found = self.locate(self.base_offset + rel)
        position = found[0] if found else 0
        while position < self.size_bytes:
            header = self.read_header(position)
            if header is None:
                return None
            if header.max_timestamp >= timestamp:
                return header.base_offset
            position += header.size_bytes
        return None

    def read(self, position: int, size_bytes: int) -> bytes:
        assert position >= 0 and position + size_bytes <= self.size_bytes
        return os.pread(self.fd, size_bytes, position)

    # ---- truncation, flush, close ----------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return the bytes removed."""
        found = self.locate(offset)
        if found is None:
            return 0
        position, header = found
        removed = self.size_bytes - position
        os.ftruncate(self.fd, position)
        self._offset_index.truncate_to_position(position)
        self._time_index.truncate_to_offset(header.base_offset - self.base_offset)
        self._indexes_full = False
        self.size_bytes = position
        if position == 0:
            self._reset_state()
            return removed
        self.next_offset = header.base_offset
        last = self._offset_index.last()
        assert last is not None
        self._bytes_since_index = position - last[1]
        time_last = self._time_index.last()
        self.max_timestamp = time_last[0] if time_last else self.rolling_timestamp
        self._refresh_max_timestamp_from(last[1])
        return removed

    def _refresh_max_timestamp_from(self, position: int) -> None:
        scan = BatchScan(self.fd, position, self.size_bytes, size_bytes_max=self.config.max_batch_bytes, verify=False)
        for _, header, _ in scan:
            self.max_timestamp = max(self.max_timestamp, header.max_timestamp)

    def flush(self) -> None:
        """Make the log durable (fsync). Indexes are written when the segment is sealed."""
        self._fsync(self.fd)

    def fd_open(self) -> bool:
        """True until the segment is closed (a released segment reopens on use)."""
        return self._fd >= 0 or self._released

    @property
    def holds_files(self) -> bool:
        """True while the segment's descriptor and mappings are open (neither closed nor released)."""
        return self._fd >= 0

    @property
    def indexes_full(self) -> bool:
        """True when an index has no room for another entry (the segment takes no more batches)."""
        return self._indexes_full

    @property
    def sealed(self) -> bool:
        return not self._offset_index.writable

    def dup_fd(self) -> int:
        """A new descriptor for the log file, owned by the caller (survives close and delete)."""
        return os.dup(self.fd)

    def seal(self) -> None:
        """Stop appending here (the log rolled): trim the indexes to size, keep serving reads.

        All or nothing: both index files are written first (a failure, a full disk, leaves the
        segment active and whole), then both indexes switch to read-only mappings; a failure in
        that switch raises ``SegmentWriteError`` (the segment can take no more appends)."""
        if not self._offset_index.writable:
            return
        self._offset_index.write_file()
        self._time_index.write_file()
        try:
            self._offset_index.make_readonly()
            self._time_index.make_readonly()
        except OSError as exc:
            raise SegmentWriteError(self.log_path, self.size_bytes, exc) from exc
        if self._handles is not None:
            self._handles.opened(self)

    def close(self, *, trim: bool = True) -> None:
        """Close files; trimming cuts the indexes to their valid entries. Idempotent."""
        if self._released:
            self._released = False
            return
        if self._fd < 0:
            return
        if self._handles is not None:
            self._handles.forget(self)
        if trim:
            self._offset_index.trim()
            self._time_index.trim()
        self._offset_index.close()
        self._time_index.close()
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        """Close and remove all three files."""
        self.close(trim=False)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(suffix))


def remove_empty_segment(directory: str, base_offset: int) -> None:
    """Remove the files of a segment that holds no batch (a segment whose creation failed
    half-way); a segment with data is never touched."""
    log_path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
    with contextlib.suppress(FileNotFoundError):
        if os.stat(log_path).st_size:
            return
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, segment_file_name(base_offset, suffix)))


def _whole_batches(data: memoryview, offset_max: int) -> tuple[int, int]:
    """Length of the whole batches at the start of ``data`` that end below ``offset_max``, and
    the offset after them. The first batch is known to qualify."""
    position, next_offset, size = 0, -1, len(data)
    while size - position >= HEADER_SIZE:
        base, length = LENGTH_PREFIX.unpack_from(data, position)
        end = position + length + LENGTH_PREFIX_SIZE
        last = base + LAST_DELTA.unpack_from(data, position + LAST_OFFSET_DELTA_OFFSET)[0]
        if end > size or last >= offset_max:
            break
        position, next_offset = end, last + 1
    assert position > 0
    return position, next_offset


def _finish_short_write(fd: int, prefix: bytes, body: memoryview, written: int) -> None:
    """Complete a short ``writev`` (rare on regular files); bounded because each step progresses."""
    rest = memoryview(bytes(prefix) + bytes(body))[written:]
    while rest:
        step = os.write(fd, rest)
        if step <= 0:
            raise OSError(f"short write: {len(rest)} bytes left")
        rest = rest[step:]
