"""The partition log's side of a compaction pass (``segments.cleaner`` runs the pass itself).

A pass may take only the oldest closed segments that are durable (below the recovery point),
whose records are all old enough (the compaction lag) and, on a replica, below the high
watermark; each comes with a descriptor of its own, so the pass reads outside the lock. The log
refuses the swap of the compacted copies, changing nothing, when it changed meanwhile (closed,
offline, or a segment taken deleted or truncated). Once the swap is committed on disk a failure
takes the log offline, and the next start finishes the swap (``segments.cleaner_files``); after
it the replaced segments are opened again from their compacted files.

Every function here runs with the log's lock held, on what the log passes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection

from segments.cleaner_files import SWAP_DIR, CleanableSegment, finish_swap, swap_dir_commit
from segments.errors import LogOfflineError
from segments.segment import LogSegment


def cleanable_locked(closed: list[LogSegment], recovery_point: int, newest_timestamp: int, end_offset: int | None,
                     dup_fds: Callable[[list[LogSegment]], list[int]]) -> list[CleanableSegment]:
    """The oldest of the ``closed`` segments a pass may compact now, each with a descriptor from
    ``dup_fds`` that the caller closes (see ``PartitionLog.cleanable_segments``)."""
    found: list[CleanableSegment] = []
    try:
        for segment in closed:
            if segment.next_offset > recovery_point or segment.max_timestamp > newest_timestamp \
                    or (end_offset is not None and segment.next_offset > end_offset):
                break
            fd = dup_fds([segment])[0]
            found.append(CleanableSegment(segment, segment.base_offset, segment.size_bytes,
                                          segment.next_offset, fd))
    except BaseException:
        for item in found:
            os.close(item.fd)
        raise
    return found


def unchanged(closed: list[LogSegment], cleaned: list[CleanableSegment]) -> bool:
    """Every segment of ``cleaned`` is still one of the ``closed`` segments, at the size read."""
    return all(item.segment in closed and item.segment.size_bytes == item.size_bytes for item in cleaned)


def swap_files_locked(directory: str, fsync: Callable[[int], None], cleaning_dir: str,
                      cleaned: list[CleanableSegment], go_offline: Callable[[str], LogOfflineError]) -> None:
    """Commit the swap of ``cleaning_dir`` (its entries fsynced already) and finish it, closing
    the replaced segments between; the swap directory's removal is left to be fsynced after the
    log's lock is let go. A failure before the commit raises as it is (nothing changed); after
    it, ``go_offline``'s error (the next start finishes the swap)."""
    try:
        swap = swap_dir_commit(directory, cleaning_dir, fsync)
    except OSError as exc:
        if os.path.isdir(os.path.join(directory, SWAP_DIR)):  # committed: the next start finishes it
            raise go_offline(f"compaction swap failed: {exc}") from exc
        raise
    for item in cleaned:
        item.segment.close(trim=False)
    try:
        finish_swap(directory, fsync, swap, sync_removal=False)
    except OSError as exc:
        raise go_offline(f"compaction swap failed: {exc}") from exc


def reopen_swapped(segments: list[LogSegment], replaced: Collection[LogSegment],
                   open_segment: Callable[[int], LogSegment]) -> list[LogSegment]:
    """``segments`` with each of ``replaced`` opened again from its compacted file (sealed), or
    left out when compaction left it empty."""
    kept: list[LogSegment] = []
    for segment in segments:
        if segment not in replaced:
            kept.append(segment)
            continue
        if not os.path.exists(segment.log_path):
            continue  # compaction left it empty
        fresh = open_segment(segment.base_offset)
        if not fresh.load():
            fresh.recover()
        fresh.seal()
        kept.append(fresh)
    return kept
