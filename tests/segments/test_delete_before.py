"""``PartitionLog.delete_before``: whole segments before an offset go, the active one never, and
the log reopens at the new start."""

from __future__ import annotations

import pytest

from segments.config import LogConfig
from segments.errors import InvalidArgumentError, OffsetOutOfRangeError
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all


def test_delete_before_keeps_the_segment_holding_the_offset(tmp_path):
    config = LogConfig(segment_bytes=1024, retention_ms=-1, flush="never")
    path = str(tmp_path / "t-0")
    with PartitionLog.open(path, config) as log:
        for i in range(60):
            log.append(batch_of([b"y" * 50], timestamp=1000 + i), leader_epoch=0)
        assert log.delete_before(0) == 0
        bases = [log.log_start_offset]
        log.roll()
        snapshot = log.append(batch_of([b"snapshot"]), leader_epoch=0).base_offset
        deleted = log.delete_before(snapshot)
        assert deleted > 0 and log.log_start_offset == snapshot > bases[0]
        assert read_all(log) == [(snapshot, b"snapshot")]
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0, 100)
        with pytest.raises(InvalidArgumentError):
            log.delete_before(-1)
        assert log.delete_before(10**9) == 0, "the active segment stays"
    with PartitionLog.open(path, config) as log:
        assert log.log_start_offset == snapshot and read_all(log) == [(snapshot, b"snapshot")]
