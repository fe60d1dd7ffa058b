"""The crash-safe file protocol that swaps compacted segments in for the originals (decision 0322).

As Kafka's ``.cleaned``/``.swap`` files, with a directory per step so that one rename commits a
whole pass:

1. the compacted segments are written complete (log, offset index, time index), fsynced, in
   ``compaction.cleaning/`` inside the partition directory; a segment that compaction leaves
   empty is a ``<base>.deleted`` marker there. A crash now: the directory is removed on start,
   the originals are untouched.
2. ``compaction.cleaning`` is renamed ``compaction.swap`` and the partition directory fsynced:
   the commit point. From here a start finishes the swap instead of discarding it.
3. each file in ``compaction.swap`` replaces its namesake (``rename`` over it), each marker's
   segment files are removed, the partition directory is fsynced and ``compaction.swap``
   removed. Every step is idempotent, so a crash anywhere in 3 is finished by the next start
   (``finish_swap``) with the same result: no record lost, none twice.

Compaction keeps base offsets (a compacted segment keeps its file name), so a new file and a
marker never name the same segment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from typing import Final, NamedTuple

from segments.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name

CLEANING_DIR: Final = "compaction.cleaning"
SWAP_DIR: Final = "compaction.swap"
DELETED_SUFFIX: Final = ".deleted"


class CleanableSegment(NamedTuple):
    """A closed segment as compaction read it: its size then, and a descriptor of its own."""

    segment: LogSegment
    base_offset: int
    size_bytes: int
    next_offset: int
    fd: int


def fsync_dir(directory: str, fsync: Callable[[int], None]) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def fresh_cleaning_dir(directory: str) -> str:
    """An empty ``compaction.cleaning`` directory (whatever an earlier pass left there removed)."""
    path = os.path.join(directory, CLEANING_DIR)
    shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path)
    return path


def mark_deleted(cleaning_dir: str, base_offset: int, fsync: Callable[[int], None]) -> None:
    """Record that compaction leaves the segment at ``base_offset`` empty (it is removed)."""
    fd = os.open(os.path.join(cleaning_dir, f"{base_offset:020d}{DELETED_SUFFIX}"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def swap_dir_commit(directory: str, cleaning_dir: str, fsync: Callable[[int], None]) -> str:
    """Step 2: rename the complete cleaning directory, its entries already fsynced
    (``fsync_dir``), to the swap directory (the commit point)."""
    swap = os.path.join(directory, SWAP_DIR)
    os.rename(cleaning_dir, swap)
    fsync_dir(directory, fsync)
    return swap


def finish_swap(directory: str, fsync: Callable[[int], None], swap: str | None = None) -> bool:
    """Step 3, and what a start does: finish a committed swap, discard an uncommitted one.
    Returns True when a swap was finished."""
    shutil.rmtree(os.path.join(directory, CLEANING_DIR), ignore_errors=True)
    swap = swap or os.path.join(directory, SWAP_DIR)
    if not os.path.isdir(swap):
        return False
    move_swapped_files(directory, swap)
    remove_swap_dir(directory, swap, fsync)
    return True


def move_swapped_files(directory: str, swap: str) -> None:
    """Step 3's renames: each marker's segment files removed, each compacted file renamed over its
    namesake. No fsync: until ``remove_swap_dir`` the committed swap directory is still there,
    and a crash has the next start do this again (each step is idempotent)."""
    names = sorted(os.listdir(swap))
    markers = [n for n in names if n.endswith(DELETED_SUFFIX)]
    for name in markers:
        base = int(name[:20])
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, segment_file_name(base, suffix)))
    for name in names:
        if name not in markers:
            os.replace(os.path.join(swap, name), os.path.join(directory, name))


def remove_swap_dir(directory: str, swap: str, fsync: Callable[[int], None]) -> None:
    """The end of step 3: the renames made durable (a directory fsync) before the swap directory,
    which would redo them, is removed; then its removal made durable."""
    fsync_dir(directory, fsync)
    shutil.rmtree(swap)
    fsync_dir(directory, fsync)


def remove_compaction_dirs(directory: str) -> None:
    """Remove both working directories (the log is being deleted)."""
    for name in (CLEANING_DIR, SWAP_DIR):
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
