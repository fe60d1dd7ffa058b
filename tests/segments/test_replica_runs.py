"""``PartitionLog.append_replicas``: a follower's copies appended a run at a time must leave the
log exactly as appending them one by one (``append_replica``) does: the same files byte for byte
(segments, rolls, indexes, epochs), and on a bad batch the same batches kept before the error."""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.batch import LENGTH_PREFIX_SIZE, PREFIX
from segments.config import LogConfig
from segments.errors import CorruptBatchError, InvalidBatchError, NonSequentialAppendError, StaleLeaderEpochError
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all

CONFIGS = (
    LogConfig(segment_bytes=1024, index_interval_bytes=128, flush="never"),
    LogConfig(segment_bytes=600, index_interval_bytes=0, segment_index_bytes=48, flush="never"),
    LogConfig(segment_ms=2_000, index_interval_bytes=0, flush="never"),
)


def _files(path: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


def _leader_stream(leader: PartitionLog, batches: list[tuple[int, int, int]]) -> bytes:
    """Append ``(epoch step, record count, timestamp step)`` batches to ``leader``; its whole log
    as the bytes a leader ships."""
    epoch, timestamp = 0, 1_000
    for step, count, ts_step in batches:
        epoch += step
        timestamp += ts_step
        leader.append(batch_of([f"{epoch}-{i}".encode() * 3 for i in range(count)], timestamp=timestamp),
                      leader_epoch=epoch)
    out, offset = b"", 0
    while offset < leader.log_end_offset:
        read = leader.read(offset, 1)
        out += bytes(read.data)
        offset = read.next_offset
    return out


@settings(max_examples=60, deadline=None)
@given(config=st.sampled_from(CONFIGS),
       batches=st.lists(st.tuples(st.sampled_from((0, 0, 0, 1)), st.integers(1, 6), st.integers(0, 900)),
                        min_size=1, max_size=30),
       cuts=st.lists(st.integers(1, 8), min_size=1, max_size=30))
def test_runs_leave_the_log_as_one_batch_at_a_time_does(config, batches, cuts):
    with tempfile.TemporaryDirectory(prefix="replica-runs-") as root:
        with PartitionLog.open(os.path.join(root, "leader"), config) as leader:
            stream = _leader_stream(leader, batches)
            expected = read_all(leader)
        one, run = os.path.join(root, "one"), os.path.join(root, "run")
        with PartitionLog.open(one, config) as by_batch, PartitionLog.open(run, config) as by_run:
            positions = []
            position = 0
            while position < len(stream):
                positions.append(position)
                position += PREFIX.unpack_from(stream, position)[1] + LENGTH_PREFIX_SIZE
            positions.append(len(stream))
            for start, end in itertools.pairwise(positions):
                by_batch.append_replica(stream[start:end])
            # The same batches in runs of varying lengths (each call: whole batches, back to back).
            index, cut = 0, 0
            while index < len(positions) - 1:
                step = cuts[cut % len(cuts)]
                cut += 1
                last = min(index + step, len(positions) - 1)
                info = by_run.append_replicas(stream[positions[index]:positions[last]])
                assert info is not None and info.log_end_offset == by_run.log_end_offset
                index = last
            assert read_all(by_run) == read_all(by_batch) == expected
            assert by_run.epoch_entries() == by_batch.epoch_entries()
            assert by_run.size_bytes == by_batch.size_bytes
        assert _files(run) == _files(one)


def _two_epochs(tmp_path) -> tuple[bytes, list[int]]:
    with PartitionLog.open(str(tmp_path / "leader"), CONFIGS[0]) as leader:
        stream = _leader_stream(leader, [(1, 2, 0), (0, 3, 0), (1, 1, 0), (0, 2, 0)])
    positions, position = [], 0
    while position < len(stream):
        positions.append(position)
        position += PREFIX.unpack_from(stream, position)[1] + LENGTH_PREFIX_SIZE
    return stream, positions


def test_a_bad_batch_keeps_those_before_it_and_raises(tmp_path):
    stream, positions = _two_epochs(tmp_path)
    corrupt = bytearray(stream)
    corrupt[positions[3] - 1] ^= 0x01  # the third batch's last record byte: its checksum fails
    with PartitionLog.open(str(tmp_path / "f"), CONFIGS[0]) as follower:
        with pytest.raises(CorruptBatchError):
            follower.append_replicas(bytes(corrupt))
        assert follower.log_end_offset == 5 and follower.epoch_entries() == [(1, 0)]
        with pytest.raises(InvalidBatchError):  # torn: the fourth batch cut short
            follower.append_replicas(stream[positions[2]:-1])
        assert follower.log_end_offset == 6 and follower.epoch_entries() == [(1, 0), (2, 5)]
        assert follower.append_replicas(stream[positions[3]:]) is not None
        assert [o for o, _ in read_all(follower)] == list(range(8))


def test_out_of_order_or_stale_runs_write_nothing(tmp_path):
    stream, positions = _two_epochs(tmp_path)
    with PartitionLog.open(str(tmp_path / "f"), CONFIGS[0]) as follower:
        with pytest.raises(NonSequentialAppendError):
            follower.append_replicas(stream[positions[1]:])
        assert follower.log_end_offset == 0 and follower.size_bytes == 0
        follower.append_replicas(stream[:positions[2]])
        follower.append(batch_of([b"x"]), leader_epoch=5)
        size = follower.size_bytes
        with pytest.raises(StaleLeaderEpochError):
            follower.append_replicas(_rebased(stream[positions[2]:], 6))
        assert follower.size_bytes == size
        assert follower.append_replicas(b"") is None


def _rebased(batch_bytes: bytes, base: int) -> bytes:
    """The first batch of ``batch_bytes`` with its base offset set to ``base`` (epoch kept)."""
    _, length, epoch = PREFIX.unpack_from(batch_bytes)
    return PREFIX.pack(base, length, epoch) + batch_bytes[PREFIX.size:length + LENGTH_PREFIX_SIZE]


@pytest.mark.parametrize("config", CONFIGS)
def test_a_run_rolls_where_single_batches_roll(tmp_path, config):
    """Batches that each roll the segment (by size, by index room, by age) in one call."""
    batches = [(0, 6, 1_500)] * 12
    with PartitionLog.open(str(tmp_path / "leader"), config) as leader:
        stream = _leader_stream(leader, batches)
    with PartitionLog.open(str(tmp_path / "one"), config) as by_batch, \
            PartitionLog.open(str(tmp_path / "run"), config) as by_run:
        position = 0
        while position < len(stream):
            end = position + PREFIX.unpack_from(stream, position)[1] + LENGTH_PREFIX_SIZE
            by_batch.append_replica(stream[position:end])
            position = end
        by_run.append_replicas(stream)
        assert read_all(by_run) == read_all(by_batch)
    assert _files(str(tmp_path / "run")) == _files(str(tmp_path / "one"))
    assert sum(name.endswith(".log") for name in os.listdir(tmp_path / "run")) > 1, "the batches rolled segments"
