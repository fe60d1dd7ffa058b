"""``--profile DIR``: sample the LogBroker node and the harness's client processes with py-spy
while a run goes, and say where the time went.

py-spy (the ``dev`` extra) records each process in its collapsed-stack ("raw") format; when the
run ends each recorder gets SIGINT (by PID) and writes its file, and ``top_frames`` turns a file
into the frames with the most samples, by self time and inclusive time (``<name>.top.txt``).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable
from typing import Final

RATE_HZ: Final = 200
STOP_TIMEOUT_S: Final = 30.0
TOP_FRAMES: Final = 30


def top_frames(lines: Iterable[str], limit: int = TOP_FRAMES) -> tuple[int, list[tuple[str, float]],
                                                                        list[tuple[str, float]]]:
    """(samples, [(frame, % self)], [(frame, % inclusive)]) of a collapsed-stack profile, whose
    lines are ``frame;frame;...;frame count``."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if total == 0:
        return 0, [], []

    def share(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(frame, 100.0 * n / total) for frame, n in counter.most_common(limit)]

    return total, share(own), share(inclusive)


def _py_spy() -> str:
    found = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(found):
        raise RuntimeError("py-spy is not installed (it is in the dev extra: pip install -e '.[dev]')")
    return found


class Profiler:
    """Records the given processes until ``stop()``; then writes ``<name>.txt`` and ``<name>.top.txt``."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self._recorders: dict[str, subprocess.Popen[bytes]] = {}

    def record(self, name: str, pid: int) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        self._recorders[name] = subprocess.Popen(
            [_py_spy(), "record", "--nonblocking", "-r", str(RATE_HZ), "-f", "raw", "-o",
             os.path.join(self.out_dir, f"{name}.txt"), "-p", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> list[str]:
        """Stop every recorder (SIGINT, then SIGKILL after a bound) and write the summaries."""
        written = []
        for name, proc in self._recorders.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
            path = os.path.join(self.out_dir, f"{name}.txt")
            with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as f:
                total, own, inclusive = top_frames(f)
                with open(os.path.join(self.out_dir, f"{name}.top.txt"), "w", encoding="utf-8") as out:
                    out.write(f"{name}: {total} samples at {RATE_HZ} Hz\n\nself time\n")
                    out.writelines(f"{pct:6.1f}%  {frame}\n" for frame, pct in own)
                    out.write("\ninclusive time\n")
                    out.writelines(f"{pct:6.1f}%  {frame}\n" for frame, pct in inclusive)
                written.append(path)
        self._recorders.clear()
        return written
