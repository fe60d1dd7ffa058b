"""Slow disks for the chaos harness, outside the broker's code: a small shared library
(``native/slow_fsync.c``, built with the C compiler at the start of a run) preloaded into every
node delays each fsync and fdatasync while that node's control file holds a delay in ms. A
node's own flush policy, acks and fencing then meet a disk that takes its time, as a saturated
or failing disk does, and the broker's code has no test hook for it.

Where no C compiler is found the fault is left out of the deck with a clear message, like the
network faults where namespaces are refused.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from typing import Final

SOURCE: Final = os.path.join(os.path.dirname(__file__), "native", "slow_fsync.c")
CONTROL_ENV: Final = "LOGBROKER_CHAOS_SLOW_DISK_FILE"
BUILD_TIMEOUT_S: Final = 60


class SlowDiskUnavailableError(RuntimeError):
    """The shim cannot be built here (no C compiler, or it failed)."""


class SlowDisks:
    def __init__(self, root: str) -> None:
        self.root = root
        self.library = os.path.join(root, "slow_fsync.so")

    @classmethod
    def build(cls, root: str) -> SlowDisks:
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise SlowDiskUnavailableError("no C compiler (cc or gcc) to build the slow-fsync shim")
        disks = cls(root)
        os.makedirs(root, exist_ok=True)
        result = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", disks.library, SOURCE, "-ldl"],
                                capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if result.returncode != 0:
            raise SlowDiskUnavailableError(f"building the slow-fsync shim failed: {result.stderr.strip()[:500]}")
        return disks

    def control(self, member: str) -> str:
        return os.path.join(self.root, f"slow-disk-{member}")

    def env(self, member: str) -> dict[str, str]:
        """What a node's environment gains: the shim preloaded, and its control file."""
        preload = " ".join(p for p in (self.library, os.environ.get("LD_PRELOAD", "")) if p)
        return {"LD_PRELOAD": preload, CONTROL_ENV: self.control(member)}

    def slow(self, member: str, delay_ms: int) -> None:
        with open(self.control(member) + ".tmp", "w", encoding="ascii") as f:
            f.write(str(delay_ms))
        os.replace(self.control(member) + ".tmp", self.control(member))

    def heal(self, member: str | None = None) -> None:
        """That member's disk (or every one) at full speed again."""
        members = [member] if member is not None else [
            name.removeprefix("slow-disk-") for name in os.listdir(self.root) if name.startswith("slow-disk-")
            and not name.endswith(".tmp")]
        for name in members:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.control(name))
