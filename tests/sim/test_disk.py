"""The simulated disk: fsync records what is durable (by inode, so across a rename); a crash cuts
each file back to it (and keeps a seeded part of the unsynced tail when tearing); fsync fails on
demand; inside the virtual world every fsync of the broker, default arguments included, is seen."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest

from segments.checkpoint import write_atomic
from sim.disk import SimDisk
from sim.loop import SimLoop
from sim.world import virtual_world


def write(path: Path, data: bytes, disk: SimDisk | None = None) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        if disk is not None:
            disk.fsync(f.fileno())


def test_a_crash_keeps_what_was_fsynced_and_loses_the_rest(tmp_path: Path):
    disk = SimDisk(random.Random(1))
    synced, never = tmp_path / "synced.log", tmp_path / "sub" / "never.log"
    never.parent.mkdir()
    write(synced, b"a" * 100, disk)
    write(synced, b"b" * 50)
    write(never, b"c" * 30)
    assert disk.durable_length(str(synced)) == 100 and disk.durable_length(str(never)) == 0
    cuts = disk.crash(str(tmp_path), tear=False)
    assert synced.read_bytes() == b"a" * 100 and never.read_bytes() == b""
    assert [(Path(c.path).name, c.size, c.kept, c.durable) for c in cuts] == [("synced.log", 150, 100, 100),
                                                                             ("never.log", 30, 0, 0)]
    assert disk.crash(str(tmp_path), tear=False) == []  # nothing unsynced is left


def test_a_torn_crash_keeps_a_seeded_part_of_the_unsynced_tail(tmp_path: Path):
    def crash(seed: int) -> list[int]:
        directory = tmp_path / str(seed)
        directory.mkdir(exist_ok=True)
        disk = SimDisk(random.Random(seed))
        kept = []
        for n in range(5):
            path = directory / f"{n}.log"
            path.unlink(missing_ok=True)
            write(path, b"x" * 10, disk)
            write(path, b"y" * 1000)
        for cut in disk.crash(str(directory)):
            assert 10 <= cut.kept <= 1010 and Path(cut.path).read_bytes()[:10] == b"x" * 10
        for n in range(5):
            kept.append(os.path.getsize(directory / f"{n}.log"))
        return kept

    assert crash(3) == crash(3) and crash(3) != crash(4)


def test_a_rename_after_fsync_stays_durable(tmp_path: Path):
    disk = SimDisk(random.Random(1))
    temp, final = tmp_path / "cp.tmp", tmp_path / "cp"
    write(temp, b"checkpoint", disk)
    os.replace(temp, final)
    disk.crash(str(tmp_path), tear=False)
    assert final.read_bytes() == b"checkpoint"


def test_fsync_fails_on_demand_under_a_directory(tmp_path: Path):
    disk = SimDisk(random.Random(1))
    (tmp_path / "bad").mkdir()
    disk.fail_fsync(str(tmp_path / "bad"))
    with pytest.raises(OSError) as failed:
        write(tmp_path / "bad" / "f", b"x", disk)
    assert failed.value.errno == errno.EIO
    write(tmp_path / "good", b"x", disk)  # elsewhere fsync works
    disk.heal_fsync(str(tmp_path / "bad"))
    write(tmp_path / "bad" / "f", b"y", disk)
    assert disk.durable_length(str(tmp_path / "bad" / "f")) == 2


def test_inside_the_virtual_world_every_fsync_reaches_the_disk(tmp_path: Path):
    disk = SimDisk(random.Random(1))
    real = os.fsync
    with virtual_world(SimLoop(), random.Random(1), fsync=disk.fsync):
        write_atomic(str(tmp_path / "offsets"), b"1 2 3\n")  # its default fsync is os.fsync, bound at import
    assert os.fsync is real and write_atomic.__defaults__ == (real,)
    assert disk.fsyncs == 2  # the temporary file and the directory
    assert disk.durable_length(str(tmp_path / "offsets")) == 6
