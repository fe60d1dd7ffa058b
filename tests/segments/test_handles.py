"""The descriptor budget of sealed segments: many logs with many segments stay within it, every
read still returns exactly what was appended (released segments reopen), segments whose fsync is
due stay open, and logs evicting each other's segments from two threads never deadlock."""

from __future__ import annotations

import os
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments.config import LogConfig
from segments.handles import SegmentHandles
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all

TINY = LogConfig(segment_bytes=300, index_interval_bytes=64, flush="never")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_segments_in_many_logs_hold_a_bounded_number_of_descriptors(tmp_path):
    budget = SegmentHandles(segments_max=6)
    before = open_fds()
    logs = [PartitionLog.open(str(tmp_path / f"t-{i}"), TINY, handles=budget) for i in range(4)]
    expected: list[list[bytes]] = [[] for _ in logs]
    for round_ in range(60):
        for i, log in enumerate(logs):
            value = f"log{i}-{round_}".encode() * 8
            log.append(batch_of([value]), leader_epoch=0)
            expected[i].append(value)
    assert all(log.segment_count > 20 for log in logs)
    assert budget.open_count <= 6 and budget.releases > 0
    # Each log: its active segment (one descriptor); sealed ones: three each, at most six open.
    assert open_fds() - before <= len(logs) + 3 * 6
    for log, values in zip(logs, expected, strict=True):
        assert [v for _, v in read_all(log)] == values
        assert log.offset_for_timestamp(0) == 0
    assert open_fds() - before <= len(logs) + 3 * 6
    for log in logs:
        log.close()
    assert open_fds() == before and budget.open_count == 0


def test_a_segment_whose_fsync_is_due_is_not_released(tmp_path):
    budget = SegmentHandles(segments_max=1)
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(segment_bytes=300, flush="interval",
                                                               flush_ms=3_600_000), handles=budget)
    for _ in range(10):
        log.append(batch_of([b"v" * 100]), leader_epoch=0)
    assert log.segment_count > 3 and budget.open_count == log.segment_count - 1  # all due, all open
    log.flush()
    log.append(batch_of([b"v" * 250]), leader_epoch=0)  # a roll: now the flushed ones may go
    assert budget.open_count <= 2
    assert len(read_all(log)) == 11
    log.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 200)), min_size=1, max_size=80),
       segments_max=st.integers(1, 4))
def test_reads_after_any_mix_of_appends_and_releases_return_what_was_appended(tmp_path_factory, steps, segments_max):
    root = tmp_path_factory.mktemp("handles")
    budget = SegmentHandles(segments_max=segments_max)
    logs = [PartitionLog.open(str(root / f"t-{i}"), TINY, handles=budget) for i in range(3)]
    expected: list[list[bytes]] = [[], [], []]
    for n, (which, append, at) in enumerate(steps):
        log = logs[which]
        if append or not expected[which]:
            value = f"{which}:{n}".encode() * 10
            log.append(batch_of([value]), leader_epoch=0)
            expected[which].append(value)
        else:
            offset = at % len(expected[which])
            assert [v for _, v in read_all(log, offset)] == expected[which][offset:]
    for log, values in zip(logs, expected, strict=True):
        assert [v for _, v in read_all(log)] == values
        log.close()
    assert budget.open_count == 0


def test_two_threads_evicting_each_others_segments_do_not_deadlock(tmp_path):
    budget = SegmentHandles(segments_max=1)
    logs = [PartitionLog.open(str(tmp_path / f"t-{i}"), TINY, handles=budget) for i in range(2)]
    errors: list[BaseException] = []

    def work(log: PartitionLog) -> None:
        try:
            for i in range(400):
                log.append(batch_of([b"x" * 100]), leader_epoch=0)
                if i % 7 == 0:
                    log.read(log.log_start_offset, 1 << 16)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(log,)) for log in logs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors
    for log in logs:
        assert len(read_all(log)) == 400
        log.close()


def test_a_segment_picked_by_two_budget_rounds_is_released_once(tmp_path):
    """Two threads' rounds may both pick the same victim: the second finds it released already
    and leaves it (it must not fail the append that triggered the round)."""
    log = PartitionLog.open(str(tmp_path / "t-0"), TINY, handles=SegmentHandles(segments_max=100))
    while log.segment_count < 3:
        log.append(batch_of([b"x" * 100]), leader_epoch=0)
    first = log._segments[0]
    assert log.try_release(first, held=False) is True
    assert log.try_release(first, held=False) is False
    assert len(read_all(log)) == log.log_end_offset
    log.close()
