"""A follower's copies appended a run at a time (``PartitionLog.append_replicas``).

The batches, back to back as the leader sent them, keep their offsets and epochs. Each is checked
as ``append_replica`` checks one (whole, valid, starting at the offset expected, or after it in a
compacted log) before it joins a run, and a run (the batches that go to one segment at one
epoch) is written at once. On a bad batch the runs before it are written and the error raised, so
the log ends exactly where appending the batches one by one would have left it.

``append_runs_locked`` takes the log's own checks and steps as callables and needs the log's lock
held, inside the log's write-error guard.
"""

from __future__ import annotations

from collections.abc import Callable

from segments.batch import HEADER_SIZE, BatchHeader, parse_header, validate_batch
from segments.errors import InvalidBatchError, NonSequentialAppendError
from segments.segment import LogSegment


def append_runs_locked(view: memoryview, expected: int, size_max: int, follows: Callable[[int, int], bool],
                       assign_epoch: Callable[[int, int], None],
                       active_for: Callable[[BatchHeader, int], LogSegment]) -> int:
    """Append the whole batches in ``view`` (bytes, not empty) from ``expected``, the log end, on;
    return the offset after the last one appended. ``follows(base, expected)``: a batch may start
    at ``base``; ``assign_epoch(epoch, base)`` records an epoch before its first batch;
    ``active_for(header, base)``: the segment a run starting with that batch goes to."""
    total = view.nbytes
    segment: LogSegment | None = None
    run: list[tuple[BatchHeader, int]] = []
    start = position = 0
    try:
        while position < total:
            if total - position < HEADER_SIZE:
                raise InvalidBatchError(f"a torn batch of {total - position} bytes at the end")
            end = position + parse_header(view, position).size_bytes
            if end > total or end <= position:
                raise InvalidBatchError(f"a torn batch at position {position}")
            header = validate_batch(view[position:end], size_bytes_max=size_max, position=position)
            if not follows(header.base_offset, expected):
                raise NonSequentialAppendError(header.base_offset, expected)
            base = header.base_offset
            if not (run and segment is not None and header.leader_epoch == run[0][0].leader_epoch
                    and segment.fits_after(header, base, position - start, len(run))):
                if run:
                    pending, run = run, []
                    assert segment is not None
                    segment.append_run(view[start:position], pending)
                assign_epoch(header.leader_epoch, base)
                segment = active_for(header, base)
                start = position
            run.append((header, base))
            expected = header.next_offset
            position = end
    finally:
        if run and segment is not None:
            segment.append_run(view[start:position], run)
    return expected
