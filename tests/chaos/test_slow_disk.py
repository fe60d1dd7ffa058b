"""The slow-disk shim really slows a process's fsync and fdatasync while its control file holds a
delay, and not otherwise: the fault reaches the calls the storage layer makes (os.fsync)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from chaos.slow_disk import SlowDisks, SlowDiskUnavailableError

PROBE = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
os.write(fd, b"x")
took = []
for call in (os.fsync, os.fdatasync):
    started = time.monotonic()
    call(fd)
    took.append(time.monotonic() - started)
print(" ".join(f"{t:.3f}" for t in took))
"""


def probe(disks: SlowDisks, tmp_path) -> list[float]:
    result = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "f")], capture_output=True, text=True,
                            env={**os.environ, **disks.env("node-1")}, timeout=60)
    assert result.returncode == 0, result.stderr
    return [float(t) for t in result.stdout.split()]


def test_fsync_is_slow_only_while_the_fault_is_on(tmp_path):
    try:
        disks = SlowDisks.build(str(tmp_path / "disks"))
    except SlowDiskUnavailableError as exc:
        pytest.fail(f"the slow-disk fault cannot be built on this machine: {exc}")
    disks.slow("node-1", 300)
    assert all(t >= 0.29 for t in probe(disks, tmp_path))
    disks.heal()
    assert not os.path.exists(disks.control("node-1"))
    assert all(t < 0.29 for t in probe(disks, tmp_path))
