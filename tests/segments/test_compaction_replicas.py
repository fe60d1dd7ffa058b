"""Replicas of a compacted log (decision 0321): a follower copies its leader's compacted batches,
gaps included (a log that is not compacted still refuses a gap), compacts its own copy, and both
hold the same latest record per key, each at the offset it was written at."""

from __future__ import annotations

from pathlib import Path

import pytest

from segments.cleaner import compact
from segments.config import LogConfig
from segments.errors import NonSequentialAppendError
from segments.log import PartitionLog
from tests.segments.compaction_helpers import keyed_batch, latest_values, read_records

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=0, flush="never", cleanup_policy="compact",
                   delete_retention_ms=10_000)


def _copy(leader: PartitionLog, follower: PartitionLog) -> None:
    """What replication does: ship the leader's batches from the follower's log end on."""
    if follower.log_end_offset < leader.log_start_offset:
        follower.truncate_fully_and_start_at(leader.log_start_offset)
    for _ in range(1000):
        result = leader.read(follower.log_end_offset, 1000)
        if not len(result.data):
            return
        follower.append_replicas(result.data)
    raise AssertionError("the copy did not finish")


def test_a_follower_copies_a_compacted_leader_across_gaps_and_both_converge(tmp_path: Path) -> None:
    leader = PartitionLog.open(str(tmp_path / "leader"), CONFIG, clock_ms=lambda: 1000)
    follower = PartitionLog.open(str(tmp_path / "follower"), CONFIG, clock_ms=lambda: 1000)
    written = {}
    for i in range(60):
        rows: list[tuple[bytes, bytes | None]] = [(b"k%d" % (i % 7), None if i % 11 == 10 else b"v%d" % i)]
        info = leader.append(keyed_batch(rows, timestamp=100 + i), leader_epoch=1)
        written[info.base_offset] = rows[0]
        if i == 30:
            _copy(leader, follower)  # the follower holds the first half before the leader compacts
    leader.roll()
    leader.append(keyed_batch([(b"k0", b"last")], timestamp=500), leader_epoch=1)
    written[leader.log_end_offset - 1] = (b"k0", b"last")
    leader.flush()
    assert compact(leader, now_ms=1000) is not None
    _copy(leader, follower)
    follower.flush()
    compact(follower, now_ms=1000)
    compact(leader, now_ms=1000)
    assert follower.log_end_offset == leader.log_end_offset
    for log in (leader, follower):
        records = read_records(log)
        assert all(written[r.offset] == (r.key, r.value) for r in records)
    assert latest_values(read_records(follower)) == latest_values(read_records(leader))
    # The same state as the writes made it.
    state: dict[bytes, bytes] = {}
    for offset in sorted(written):
        key, value = written[offset]
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    assert latest_values(read_records(leader)) == state
    leader.close()
    follower.close()


def test_a_log_that_is_not_compacted_refuses_a_gap(tmp_path: Path) -> None:
    source = PartitionLog.open(str(tmp_path / "s"), CONFIG)
    for i in range(3):
        source.append(keyed_batch([(b"k", b"%d" % i)], timestamp=100), leader_epoch=0)
    data = source.read(1, 1000).data
    plain = PartitionLog.open(str(tmp_path / "p"), LogConfig(flush="never"))
    with pytest.raises(NonSequentialAppendError):
        plain.append_replicas(data)
    compacted = PartitionLog.open(str(tmp_path / "c"), CONFIG)
    info = compacted.append_replicas(data)
    assert info is not None and compacted.log_end_offset == 3
    assert [r.offset for r in read_records(compacted)] == [1, 2]
    for log in (source, plain, compacted):
        log.close()
