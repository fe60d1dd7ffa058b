"""One compaction pass over a partition log: read its cleanable segments, write compacted copies
aside and swap them in (``segments.compaction`` decides what is kept, ``segments.cleaner_files``
how the files change). Runs outside the log's lock (a background thread): appends and reads go
on meanwhile, and the swap is refused, changing nothing, if the segments it read changed.

I/O is bounded by ``throttle``, called with the bytes read and written so far, which may sleep.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

from segments.batch import PREFIX_SIZE, BatchHeader, parse_header
from segments.cleaner_files import CleanableSegment, fresh_cleaning_dir, fsync_dir, mark_deleted
from segments.compaction import KEYS_PER_PASS_MAX, Opener, Sealer, add_latest_offsets, compact_batch
from segments.errors import InvalidBatchError
from segments.log import PartitionLog
from segments.scan import BatchScan, ScanStop
from segments.segment import INDEX_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name


class PassResult(NamedTuple):
    """What one pass did: segments read and rewritten, bytes before and after, records dropped."""

    swapped: bool
    segments_read: int
    segments_rewritten: int
    bytes_read: int
    bytes_after: int
    records_removed: int


# A pass that has run this long without sleeping sleeps ``HANDOVER_S``: a thread running Python
# keeps the GIL until it blocks or another thread has waited the switch interval (5 ms), so without
# this an event loop in the same process would wait up to that long for each turn (decision 0327).
HANDOVER_AFTER_S = 0.001
HANDOVER_S = 0.0001


class Throttle:
    """Sleeps so that the bytes passed to ``spend`` average at most ``rate_bytes_per_s`` (0: no
    bound), and at least every ``HANDOVER_AFTER_S`` of work, so the pass hands the GIL over;
    shared by every pass of a node, whichever thread runs it."""

    def __init__(self, rate_bytes_per_s: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate_bytes_per_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._due = clock()
        self._slept = clock()

    def spend(self, size_bytes: int) -> None:
        with self._lock:
            now = self._clock()
            wait = 0.0
            if self.rate > 0 and size_bytes > 0:
                self._due = max(self._due, now) + size_bytes / self.rate
                wait = self._due - now
            if wait <= 0 and now - self._slept >= HANDOVER_AFTER_S:
                wait = HANDOVER_S
            if wait > 0:
                self._slept = now + wait
        if wait > 0:
            self._sleep(min(wait, 10.0))


def _batches(item: CleanableSegment, size_bytes_max: int,
             spend: Callable[[int], None]) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The segment's batches; each one's bytes are spent once the caller is done with it, so the
    throttle paces the pass batch by batch."""
    scan = BatchScan(item.fd, 0, item.size_bytes, size_bytes_max=size_bytes_max, verify=True)
    for _, header, batch in scan:
        assert batch is not None
        yield header, batch
        spend(header.size_bytes)
    if scan.stop is not ScanStop.END:
        raise InvalidBatchError(f"segment {item.base_offset} unreadable for compaction: {scan.stop.value} {scan.error}")


def compact(log: PartitionLog, *, now_ms: int, opener: Opener | None = None, sealer: Sealer | None = None,
            throttle: Throttle | None = None, fsync: Callable[[int], None] = os.fsync,
            keys_max: int = KEYS_PER_PASS_MAX, end_offset: int | None = None) -> PassResult | None:
    """One pass over ``log`` with its own config; None when nothing is cleanable yet. With no
    dirty segment, a pass still drops the tombstones past ``delete_retention_ms``. Only segments
    wholly below ``end_offset`` (the replica's high watermark; None: the whole log, for a log no
    leader change can truncate) are read or rewritten."""
    config = log.config
    spend = (throttle or Throttle(0)).spend
    cleanable = log.cleanable_segments(now_ms - config.min_compaction_lag_ms, end_offset)
    cleaning: str | None = None
    try:
        if not cleanable:
            return None
        # As Kafka's cleaner: the key map covers the dirty segments (from the first one not compacted
        # yet), as many as ``keys_max`` keys allow, and every segment up to the last one mapped is
        # rewritten with it. The compacted ones before hold each key at most once already, so a
        # key the map lacks is the latest there.
        dirty_from = log.cleaned_offset
        latest: dict[bytes, int] = {}
        used: list[CleanableSegment] = []
        for item in cleanable:
            used.append(item)
            if item.next_offset <= dirty_from:
                continue
            add_latest_offsets(latest, _batches(item, config.max_batch_bytes, spend), opener=opener,
                               size_bytes_max=config.max_batch_bytes)
            if len(latest) >= keys_max:
                break
        tombstone_before = now_ms - config.delete_retention_ms
        cleaning = fresh_cleaning_dir(log.directory)
        rewritten: list[CleanableSegment] = []
        bytes_read = bytes_after = removed = 0
        keep_offset = cleanable[-1].next_offset - 1
        for item in used:
            outcome = _rewrite(log, cleaning, item, latest, tombstone_before, keep_offset, opener, sealer, fsync,
                               spend)
            bytes_read += item.size_bytes
            if outcome[1] == 0:
                bytes_after += item.size_bytes
                continue
            rewritten.append(item)
            bytes_after += outcome[0]
            removed += outcome[1]
        end = used[-1].next_offset
        if not rewritten:
            log.mark_cleaned(used, end)
            return PassResult(False, len(used), 0, bytes_read, bytes_after, 0)
        fsync_dir(cleaning, fsync)
        swapped = log.swap_cleaned(rewritten, cleaning, end)
        if swapped:
            cleaning = None
        return PassResult(swapped, len(used), len(rewritten), bytes_read, bytes_after, removed if swapped else 0)
    finally:
        for item in cleanable:
            os.close(item.fd)
        if cleaning is not None:
            shutil.rmtree(cleaning, ignore_errors=True)


def _rewrite(log: PartitionLog, cleaning: str, item: CleanableSegment, latest: dict[bytes, int],
             tombstone_before: int, keep_offset: int, opener: Opener | None, sealer: Sealer | None,
             fsync: Callable[[int], None], spend: Callable[[int], None]) -> tuple[int, int]:
    """Write the compacted copy of one segment in ``cleaning`` (log and both indexes, fsynced),
    batch by batch; returns its size and the records removed. Removing none (or one whose
    rewritten batches would overflow its indexes) leaves no file: the segment stays as it is."""
    config = log.config
    segment = LogSegment(cleaning, item.base_offset, config, fsync=fsync)
    removed = 0
    overflow = False
    try:
        for header, batch in _batches(item, config.max_batch_bytes, spend):
            kept, stats = compact_batch(batch, header, latest, tombstone_before_ms=tombstone_before,
                                        opener=opener, sealer=sealer, size_bytes_max=config.max_batch_bytes,
                                        keep_offset=keep_offset)
            removed += stats.records_in - stats.records_kept
            for out in kept:
                overflow = segment.indexes_full
                if overflow:
                    break
                view = memoryview(out)
                out_header = parse_header(view)
                segment.append(bytes(view[:PREFIX_SIZE]), view[PREFIX_SIZE:], out_header, out_header.base_offset)
                spend(len(view))
            if overflow:
                removed = 0
                break
        if removed == 0 or segment.size_bytes == 0:
            segment.delete()
            if removed:
                mark_deleted(cleaning, item.base_offset, fsync)
            return 0, removed
        segment.seal()
        segment.flush()
        size = segment.size_bytes
        segment.close(trim=True)
    except BaseException:
        segment.delete()
        raise
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        fd = os.open(os.path.join(cleaning, segment_file_name(item.base_offset, suffix)), os.O_RDONLY)
        try:
            fsync(fd)
        finally:
            os.close(fd)
    return size, removed
