"""The node's compactor (decision 0323): which partition a round compacts, and what a pass records."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from logbroker.compactor import IDLE_RETRY_MS, Compactor, wants_pass
from segments.batch import decode_records, iter_batches
from segments.cleaner_files import SWAP_DIR, fresh_cleaning_dir
from segments.config import LogConfig
from segments.encryption import NONCE_BYTES, is_sealed, open_batch, seal_batch
from segments.key_ring import KeyRing, new_key
from segments.log import PartitionLog
from tests.segments.compaction_helpers import keyed_batch, read_records

CONFIG = LogConfig(segment_bytes=400, flush="never", cleanup_policy="compact", min_cleanable_dirty_ratio=0.5)


@dataclasses.dataclass
class Replica:
    topic: str
    partition: int
    log: PartitionLog
    high_watermark: int = 1 << 62


def _log(path: Path, config: LogConfig, writes: int) -> PartitionLog:
    log = PartitionLog.open(str(path), config, clock_ms=lambda: 10_000)
    for i in range(writes):
        log.append(keyed_batch([(b"k%d" % (i % 2), b"v%d" % i)], timestamp=1000 + i), leader_epoch=0)
    log.roll()
    log.flush()
    return log


def test_a_pass_is_wanted_past_the_dirty_ratio_or_the_max_lag_and_never_without_compaction(tmp_path: Path) -> None:
    dirty = _log(tmp_path / "a", CONFIG, 20)
    assert wants_pass(dirty, 10_000) == 1.0
    lagging = _log(tmp_path / "b", LogConfig.from_mapping({"min_cleanable_dirty_ratio": 1, "max_compaction_lag_ms": 5},
                                                           CONFIG), 20)
    assert wants_pass(lagging, 10_000) == 2.0  # past its max lag: ahead of every ratio
    plain = _log(tmp_path / "c", LogConfig(segment_bytes=400, flush="never"), 20)
    assert wants_pass(plain, 10_000) is None
    empty = _log(tmp_path / "d", CONFIG, 0)
    assert wants_pass(empty, 10_000) is None
    for log in (dirty, lagging, plain, empty):
        log.close()


def test_offer_compacts_the_neediest_user_partition_and_records_it(tmp_path: Path) -> None:
    internal = Replica("__consumer_offsets", 0, _log(tmp_path / "i", CONFIG, 20))
    user = Replica("state", 3, _log(tmp_path / "u", CONFIG, 20))
    compactor = Compactor(0, clock_ms=lambda: 10_000)
    assert compactor.offer([internal, user]) == ("state", 3)
    deadline = time.monotonic() + 10
    while compactor.running and time.monotonic() < deadline:
        time.sleep(0.01)
    compactor.close()
    status = compactor.status[("state", 3)]
    assert status.passes == 1 and status.last_ms == 10_000 and status.records_removed > 0
    assert status.bytes_removed > 0 and user.log.dirty_ratio() == 0.0
    assert [r.value for r in read_records(user.log)] == [b"v18", b"v19"]
    assert len(read_records(internal.log)) == 20  # internal topics are left to their owners
    internal.log.close()
    user.log.close()


def test_a_pass_over_batches_sealed_at_rest_opens_and_seals_them_again(tmp_path: Path) -> None:
    ring = KeyRing({1: new_key()}, 1)
    log = PartitionLog.open(str(tmp_path / "s"), CONFIG, clock_ms=lambda: 10_000)
    for i in range(20):
        batch = keyed_batch([(b"k%d" % (i % 2), b"v%d" % i), (b"k%d" % (i % 2), b"w%d" % i)], timestamp=1000 + i)
        log.append(bytes(seal_batch(batch, ring, os.urandom(NONCE_BYTES))), leader_epoch=0)
    log.roll()
    log.flush()
    result = Compactor(0, ring=ring, clock_ms=lambda: 10_000).run_pass(Replica("sealed", 0, log))
    assert result is not None and result.records_removed == 38
    data = log.read(log.log_start_offset, 1 << 20).data
    assert all(is_sealed(header) for _, header in iter_batches(data))
    records = [r for position, header in iter_batches(data)
               for r in decode_records(bytes(open_batch(data[position:position + header.size_bytes], ring)))]
    assert [(r.key, r.value) for r in records] == [(b"k0", b"w18"), (b"k1", b"w19")]
    log.close()


def test_deleting_a_log_removes_what_a_pass_left(tmp_path: Path) -> None:
    log = _log(tmp_path / "d", CONFIG, 4)
    fresh_cleaning_dir(log.directory)
    os.mkdir(os.path.join(log.directory, SWAP_DIR))
    log.delete()
    assert not os.path.exists(log.directory)


def test_a_partition_with_nothing_cleanable_yet_does_not_starve_the_others(tmp_path: Path) -> None:
    lagged = Replica("lagged", 0, _log(tmp_path / "l", LogConfig.from_mapping({"min_compaction_lag_ms": 10**9},
                                                                              CONFIG), 40))
    other = Replica("other", 0, _log(tmp_path / "o", CONFIG, 20))
    now = [10_000]
    compactor = Compactor(0, clock_ms=lambda: now[0])
    assert wants_pass(lagged.log, now[0]) == 1.0
    assert compactor.run_pass(lagged) is None  # all of it within the lag
    assert compactor.offer([lagged, other]) == ("other", 0)
    deadline = time.monotonic() + 10
    while compactor.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("other", 0) in compactor.status
    assert compactor.offer([lagged]) is None  # still idle
    now[0] += IDLE_RETRY_MS
    assert compactor.offer([lagged]) == ("lagged", 0)
    compactor.close()
    for replica in (lagged, other):
        replica.log.close()


def test_a_pass_leaves_whatever_lies_above_the_high_watermark(tmp_path: Path) -> None:
    """A record a leader change may still truncate must not remove a committed one: the pass
    stops at the last closed segment wholly below the high watermark."""
    log = _log(tmp_path / "h", CONFIG, 40)
    bases = [item.base_offset for item in log.cleanable_segments(10_000)]
    for item in log.cleanable_segments(10_000):
        os.close(item.fd)
    assert len(bases) >= 4
    committed = bases[2]  # the third closed segment and everything after it are not committed yet
    before = read_records(log)
    compactor = Compactor(0, clock_ms=lambda: 10_000)
    result = compactor.run_pass(Replica("uncommitted", 0, log, high_watermark=committed))
    assert result is not None and result.records_removed > 0
    after = read_records(log)
    assert [r for r in after if r.offset >= committed] == [r for r in before if r.offset >= committed]
    latest_committed = {r.key: r.value for r in before if r.offset < committed}
    below = [r for r in after if r.offset < committed]
    assert {r.key: r.value for r in below} == latest_committed and len(below) == len(latest_committed)
    assert compactor.run_pass(Replica("uncommitted", 0, log, high_watermark=0)) is None
    compactor.close()
    log.close()
