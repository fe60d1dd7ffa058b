"""Opening a partition log: what is on disk becomes its segments, and the report says what was lost.

A log closed cleanly (``close`` fsynced everything, then wrote ``CLEAN_SHUTDOWN_FILE``) only loads
its segments' indexes. Otherwise every segment not wholly below the recovery point (and any whose
index does not load) is scanned again batch by batch and cut back to its last whole, valid batch,
so a read never returns a batch that fails its checksum; a segment that follows damaged or
overlapping data is deleted, since nothing is ever kept after a partial batch. Loss is reported in
the ``RecoveryReport``, never only logged. The leader epoch history is then cut to the recovered
log (``segments.log_epochs``).
After a clean shutdown the recovery point is the log end; after a crash it stays where it was (at
most the recovered end), and the closed segments past it are fsynced by the next flush before it
may pass them.

``recover_locked`` runs inside ``PartitionLog.open`` with the new log's lock held (the descriptor
budget may reach its sealed segments while they load), on what the log passes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final, NamedTuple

from segments.checkpoint import TMP_SUFFIX
from segments.cleaner_files import finish_swap, fsync_dir
from segments.log_epochs import EpochHistory
from segments.scan import ScanStop
from segments.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment

CLEAN_SHUTDOWN_FILE: Final = "clean-shutdown"


class RecoveryReport(NamedTuple):
    """What ``PartitionLog.open`` found and did; loss is reported here, never only logged."""

    clean_shutdown: bool
    segments: int
    segments_recovered: int
    batches_scanned: int
    truncated_bytes: int
    segments_deleted: int
    log_end_offset: int
    errors: tuple[str, ...]


class Recovered(NamedTuple):
    """What ``recover_locked`` hands the log: the report, the epoch history, the recovery point
    and the closed segments the next flush must fsync before the point may pass them."""

    report: RecoveryReport
    epochs: EpochHistory
    recovery_point: int
    unflushed: list[LogSegment]


def recover_locked(directory: str, fsync: Callable[[int], None], recovery_point: int, segments: list[LogSegment],
                   open_segment: Callable[[int], LogSegment], add_segment: Callable[[LogSegment], None]) -> Recovered:
    """Load or recover every segment file in ``directory`` (finishing a committed compaction swap
    first), handing each kept one to ``add_segment``, which appends it to ``segments`` (empty
    before); a log with none gets an empty one at offset 0."""
    finish_swap(directory, fsync)
    marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
    clean = os.path.exists(marker)
    if clean:
        os.unlink(marker)
        fsync_dir(directory, fsync)
    bases = list_bases(directory)
    errors: list[str] = []
    recovered = scanned = truncated = deleted = 0
    epoch_starts: list[tuple[int, int]] = []  # where each epoch's run of batches starts in the tail
    for i, base in enumerate(bases):
        if segments and (truncated or base < segments[-1].next_offset):
            open_segment(base).delete()
            deleted += 1
            errors.append(f"segment {base} deleted: it follows damaged or overlapping data")
            continue
        segment = open_segment(base)
        covered = i + 1 < len(bases) and bases[i + 1] <= recovery_point
        if (clean or covered) and segment.load():
            add_segment(segment)
            continue
        report = segment.recover()
        if not covered:  # the tail past the recovery point: its epochs may be missing from the checkpoint
            epoch_starts.extend(report.epoch_starts)
        recovered += 1
        scanned += report.batches
        truncated += report.truncated_bytes
        if report.stop is not ScanStop.END:
            errors.append(f"segment {base}: {report.stop.value} at position {report.valid_bytes}"
                          f" ({report.truncated_bytes} bytes cut): {report.error}")
        if segment.size_bytes == 0 and i + 1 < len(bases) and not truncated:
            segment.delete()
            deleted += 1
            continue
        add_segment(segment)
    if not segments:
        add_segment(open_segment(0))
    end = segments[-1].next_offset
    epochs = EpochHistory.load(directory, fsync, errors, segments[0].base_offset, end)
    if epochs.adopt(e for e in epoch_starts if segments[0].base_offset <= e[1] < end):
        epochs.write()
        epochs.sync()
    unflushed: list[LogSegment] = []
    if clean:  # close() fsynced everything before it wrote the mark
        recovery_point = end
    else:
        # What the crashed process wrote past the recovery point may never have reached the
        # disk: the next flush fsyncs those segments too before the point may pass them.
        recovery_point = min(recovery_point, end)
        unflushed = [s for s in segments[:-1] if s.next_offset > recovery_point]
    found = RecoveryReport(clean, len(segments), recovered, scanned, truncated, deleted, end, tuple(errors))
    return Recovered(found, epochs, recovery_point, unflushed)


def list_bases(directory: str) -> list[int]:
    """Base offsets of the segment files; removes temp files and indexes without a log."""
    bases, index_bases = set(), set()
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        path = os.path.join(directory, name)
        if name.endswith(TMP_SUFFIX):
            os.unlink(path)
        elif len(stem) == 20 and stem.isdigit():
            if "." + suffix == LOG_SUFFIX:
                bases.add(int(stem))
            elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                index_bases.add((int(stem), path))
    for base, path in index_bases:
        if base not in bases:
            os.unlink(path)
    return sorted(bases)

