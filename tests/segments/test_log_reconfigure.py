"""``PartitionLog.reconfigure``: a changed config takes effect on an open log (the segment size
at the active segment's next append, retention at the next pass, the batch limit at once) while
the index size stays what each segment was opened with."""

from __future__ import annotations

import dataclasses

import pytest

from segments.config import LogConfig
from segments.errors import BatchTooLargeError
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all

BIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=128, flush="never", max_batch_bytes=4096,
                retention_ms=-1)


def test_a_smaller_segment_size_rolls_the_active_segment_and_retention_applies_at_once(tmp_path):
    with PartitionLog.open(str(tmp_path / "t-0"), BIG) as log:
        for i in range(5):
            log.append(batch_of([b"x" * 300], timestamp=1_000 + i), leader_epoch=0)
        assert log.segment_count == 1
        log.reconfigure(dataclasses.replace(BIG, segment_bytes=1024, segment_index_bytes=BIG.segment_index_bytes * 2))
        assert log.config.segment_bytes == 1024 and log.config.segment_index_bytes == BIG.segment_index_bytes
        for i in range(6):
            log.append(batch_of([b"y" * 300], timestamp=2_000 + i), leader_epoch=0)
        assert log.segment_count >= 3
        assert log.apply_retention() == 0
        log.reconfigure(dataclasses.replace(log.config, retention_bytes=1024))
        assert log.apply_retention() > 0 and log.log_start_offset > 0
        assert [o for o, _ in read_all(log)][-1] == 10


def test_the_batch_limit_changes_at_once(tmp_path):
    with PartitionLog.open(str(tmp_path / "t-0"), BIG) as log:
        big = batch_of([b"z" * 5000])
        with pytest.raises(BatchTooLargeError):
            log.append(big, leader_epoch=0)
        log.reconfigure(dataclasses.replace(BIG, max_batch_bytes=8192))
        assert log.append(big, leader_epoch=0).base_offset == 0
    with PartitionLog.open(str(tmp_path / "t-0"), dataclasses.replace(BIG, max_batch_bytes=8192)) as again:
        assert read_all(again) == [(0, b"z" * 5000)]
