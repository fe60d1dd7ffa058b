"""CPU time and memory of processes, from /proc (Linux), to say where a run's time went; and this
process's open-files limit, which thousands of benchmark connections need raised."""

from __future__ import annotations

import os
import resource
import time
from typing import Final

OPEN_FILES_SPARE: Final = 512        # descriptors beside the connections (logs, pipes, libraries)
CLOCK_TICKS_PER_S: Final = os.sysconf("SC_CLK_TCK")
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MB (10^6 bytes)."""
    with open(f"/proc/{pid}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * PAGE_BYTES / 1e6


def raise_open_files_limit(connections: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit when below ``connections`` plus
    ``OPEN_FILES_SPARE`` (children started afterwards inherit it); the soft limit now. Raises
    when even the hard limit is too low."""
    needed = connections + OPEN_FILES_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(f"{needed} open files are needed, the hard limit is {hard} (raise it with ulimit -Hn)")
    raised = needed if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    return raised


class CpuMeter:
    """CPU use of the server and of this (client) process over a timed section, as % of one core."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self._start = (0.0, 0.0, 0.0)

    def start(self) -> None:
        self._start = (time.perf_counter(), cpu_seconds(self.server_pid), own_cpu_seconds())

    def stop(self) -> tuple[float, float, float]:
        """(wall seconds, server CPU %, client CPU %) since ``start``."""
        wall = time.perf_counter() - self._start[0]
        server = cpu_seconds(self.server_pid) - self._start[1]
        client = own_cpu_seconds() - self._start[2]
        return wall, 100.0 * server / wall, 100.0 * client / wall
