"""The partition log's side of a compaction pass (``segments.cleaner`` runs the pass itself).

A pass may take only the oldest closed segments that are durable (below the recovery point),
whose records are all old enough (the compaction lag) and, on a replica, below the high
watermark; each comes with a descriptor of its own, so the pass reads outside the lock. The log
refuses the swap of the compacted copies, changing nothing, when it changed meanwhile (closed,
offline, or a segment taken deleted or truncated). Once the swap is committed on disk a failure
takes the log offline, and the next start finishes the swap (``segments.cleaner_files``); after
it the replaced segments are opened again from their compacted files.

The functions ending in ``_locked`` run with the log's lock held, on what the log passes it;
``commit_swap`` runs under the log's swap lock alone (``PartitionLog.swap_cleaned``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection

from segments.cleaner_files import SWAP_DIR, CleanableSegment, move_swapped_files, swap_dir_commit
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


class SwapCommittedError(Exception):
    """The swap is committed on disk but could not be finished in this process."""


def commit_swap(directory: str, fsync: Callable[[int], None], cleaning_dir: str) -> str:
    """Step 2 (the commit), without the log's lock; the swap lock keeps the segments it replaces
    as they were read. A failure before the rename raises ``OSError`` as it is (nothing changed);
    after it, ``SwapCommittedError`` (the next start finishes the swap)."""
    swap = os.path.join(directory, SWAP_DIR)
    if os.path.lexists(swap):  # not this pass's: only a start finishes (or a failure leaves) one
        raise FileExistsError(f"{swap} is there already")
    try:
        return swap_dir_commit(directory, cleaning_dir, fsync)
    except OSError as exc:
        if os.path.isdir(swap):
            raise SwapCommittedError(str(exc)) from exc
        raise


def move_files_locked(directory: str, swap: str, cleaned: list[CleanableSegment],
                      go_offline: Callable[[str], LogOfflineError]) -> None:
    """Step 3's renames, with the log's lock held: the replaced segments are closed first (the
    caller opens them again from their compacted files under the same hold). A failure takes
    the log offline (the next start finishes the swap)."""
    for item in cleaned:
        item.segment.close(trim=False)
    try:
        move_swapped_files(directory, swap)
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
