"""Crash and corruption: a killed writer, a torn tail at every byte, flipped bytes, damaged
indexes. The log must always open, keep every complete batch before the damage, report what it
cut, and never return a corrupt batch."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from segments.batch import iter_batches
from segments.config import LogConfig
from segments.log import CLEAN_SHUTDOWN_FILE, PartitionLog
from segments.reader import SegmentReader
from tests.conftest import ROOT
from tests.segments.helpers import batch_of, read_all

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, flush="never")
WRITER_ACKS_MIN = 3000
WRITER_WAIT_S = 60


def build(path: str, batches: int = 60, config: LogConfig = CONFIG) -> list[tuple[int, bytes]]:
    with PartitionLog.open(path, config) as log:
        for i in range(batches):
            log.append(batch_of([f"r{i}-{j}".encode() * 4 for j in range(1 + i % 4)], timestamp=1000 + i),
                       leader_epoch=i // 20)
        return read_all(log)


def crash_copy(log: PartitionLog, dest: str) -> None:
    """The files as a killed process leaves them: open indexes untrimmed, no clean-shutdown mark."""
    shutil.copytree(log.directory, dest)
    assert not os.path.exists(os.path.join(dest, CLEAN_SHUTDOWN_FILE))


def segment_files(path: str, suffix: str) -> list[str]:
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(suffix))


def test_killed_writer_loses_no_acknowledged_append(tmp_path):
    directory = str(tmp_path / "t-0")
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-m", "tests.segments.crash_writer", directory, "never"],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    acked: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + WRITER_WAIT_S
        assert proc.stdout is not None
        while len(acked) < WRITER_ACKS_MIN and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            base, last = map(int, line.split())
            acked.append((base, last))
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert len(acked) >= WRITER_ACKS_MIN, "the writer did not get far enough to test anything"
    with PartitionLog.open(directory, LogConfig(segment_bytes=64 * 1024)) as log:
        assert log.recovery is not None and not log.recovery.clean_shutdown
        assert log.log_end_offset >= acked[-1][1] + 1
        got = dict(read_all(log))
        for n, (base, last) in enumerate(acked):
            assert got[base] == f"{n}:0".encode() * 3
            assert got[last] == f"{n}:{last - base}".encode() * 3
        log.append(batch_of([b"after"]), leader_epoch=log.latest_epoch)


def test_torn_tail_at_every_byte_of_the_last_batch(tmp_path):
    source = str(tmp_path / "source")
    with PartitionLog.open(source, CONFIG) as log:
        for i in range(6):
            log.append(batch_of([f"x{i}".encode() * 10] * 3, timestamp=1000 + i), leader_epoch=0)
        expected = read_all(log)
        last_start = log.read(15, 1 << 20)
    segment = segment_files(source, ".log")[-1]
    size = os.path.getsize(segment)
    last_size = len(last_start.data)
    for cut in range(size - last_size, size):
        target = str(tmp_path / f"cut-{cut}")
        shutil.copytree(source, target)
        os.truncate(os.path.join(target, os.path.basename(segment)), cut)
        with PartitionLog.open(target, CONFIG) as log:
            assert log.log_end_offset == 15, cut
            assert read_all(log) == expected[:15]
            assert log.recovery is not None and log.recovery.truncated_bytes == cut - (size - last_size)
            assert log.append(batch_of([b"new"]), leader_epoch=0).base_offset == 15
        shutil.rmtree(target)


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_flipped_byte_mid_segment_cuts_the_log_there(tmp_path, where):
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=256, flush="never")
    live = PartitionLog.open(str(tmp_path / "live"), config)
    for i in range(100):
        live.append(batch_of([f"y{i}".encode() * 8] * 2, timestamp=1000 + i), leader_epoch=0)
    target = str(tmp_path / "crashed")
    crash_copy(live, target)
    live.close()
    segment = segment_files(target, ".log")[0]
    with open(segment, "r+b") as f:
        data = f.read()
        boundaries = [pos for pos, _ in iter_batches(data)]
        damaged = boundaries[int(len(boundaries) * where)]
        f.seek(damaged + 40)
        f.write(bytes([data[damaged + 40] ^ 0x10]))
    kept = boundaries.index(damaged)
    with PartitionLog.open(target, config) as log:
        assert log.log_end_offset == 2 * kept
        assert [o for o, _ in read_all(log)] == list(range(2 * kept))
        assert log.recovery is not None and log.recovery.errors
        assert os.path.getsize(segment) == damaged


def test_damage_in_an_early_segment_drops_the_segments_after_it(tmp_path):
    live = PartitionLog.open(str(tmp_path / "live"), CONFIG)
    for i in range(200):
        live.append(batch_of([f"z{i}".encode() * 8], timestamp=1000 + i), leader_epoch=0)
    assert live.segment_count > 3
    target = str(tmp_path / "crashed")
    crash_copy(live, target)
    live.close()
    second = segment_files(target, ".log")[1]
    base = int(os.path.basename(second)[:20])
    with open(second, "r+b") as f:
        f.seek(5)  # inside batch_length of the first batch: a length that cannot be right
        f.write(b"\xff\xff")
    with PartitionLog.open(target, CONFIG) as log:
        assert log.log_end_offset == base
        assert log.segment_count == 2
        assert [o for o, _ in read_all(log)] == list(range(base))


@pytest.mark.parametrize("damage", ["delete", "garbage", "odd_size", "zeros"])
@pytest.mark.parametrize("which", [".index", ".timeindex"])
def test_damaged_index_files_are_rebuilt(tmp_path, damage, which):
    path = str(tmp_path / "t-0")
    expected = build(path)
    for index in segment_files(path, which):
        size = os.path.getsize(index)
        if damage == "delete":
            os.unlink(index)
        elif damage == "garbage":
            with open(index, "wb") as f:
                f.write(os.urandom(max(size, 24)))
        elif damage == "odd_size":
            with open(index, "ab") as f:
                f.write(b"\x01\x02\x03")
        else:
            with open(index, "wb") as f:
                f.write(bytes(size))
    with PartitionLog.open(path, CONFIG) as log:
        assert read_all(log) == expected
        for offset in range(0, len(expected), 7):
            assert read_all(log, start=offset)[0][0] == offset
        assert log.offset_for_timestamp(1030) == [o for o, _ in expected][sum(1 + i % 4 for i in range(30))]
        assert log.recovery is not None and log.recovery.segments_recovered > 0


def test_unclean_open_recovers_only_from_the_recovery_point(tmp_path):
    live = PartitionLog.open(str(tmp_path / "live"), CONFIG)
    for i in range(200):
        live.append(batch_of([f"w{i}".encode() * 8], timestamp=1000 + i), leader_epoch=0)
    point = live.flush()
    for i in range(20):
        live.append(batch_of([b"tail"], timestamp=5000 + i), leader_epoch=0)
    target = str(tmp_path / "crashed")
    crash_copy(live, target)
    live.close()
    with PartitionLog.open(target, CONFIG, recovery_point=point) as log:
        assert log.recovery is not None
        assert 1 <= log.recovery.segments_recovered <= 2 < log.segment_count
        assert log.log_end_offset == 220


def test_leftover_temp_and_orphan_index_files_are_removed(tmp_path):
    path = str(tmp_path / "t-0")
    expected = build(path, batches=10)
    for name in ("00000000000000099999.index", "00000000000000099999.timeindex", "leader-epoch-checkpoint.tmp"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"junk")
    with PartitionLog.open(path, CONFIG) as log:
        assert read_all(log) == expected
    names = os.listdir(path)
    assert not any(n.startswith("00000000000000099999") or n.endswith(".tmp") for n in names)


def test_reader_never_returns_a_corrupt_batch(tmp_path):
    path = str(tmp_path / "t-0")
    expected = build(path)
    segment = segment_files(path, ".log")[0]
    with open(segment, "r+b") as f:
        data = f.read()
        boundaries = [pos for pos, _ in iter_batches(data)]
        f.seek(boundaries[3] + 70)
        f.write(bytes([data[boundaries[3] + 70] ^ 0x01]))
    reader = SegmentReader(path)
    got = []
    with pytest.raises(Exception) as err:
        for record in reader.iter_records():
            got.append((record.offset, record.value))
    assert type(err.value).__name__ == "CorruptBatchError"
    assert got == expected[: len(got)] and len(got) < len(expected)
