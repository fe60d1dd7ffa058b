"""One node process per data directory: an exclusive lock on ``<data_dir>/.lock``, held for the
process's life (as Kafka locks each log directory).

Why: two processes on one data directory would append to the same segments and rewrite the same
checkpoints, and neither would notice until the files were corrupt. ``flock`` is dropped by the
kernel when its holder dies, ``kill -9`` included, so a crashed node never leaves a stale lock and
a restart needs no clean-up. The file names the holder's pid for the error message only; the lock,
not the file's contents, is the proof.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Final, final

LOCK_NAME: Final = ".lock"


class DataDirInUseError(RuntimeError):
    """Another live process holds the data directory."""


@final
class DataDirLock:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (creating the directory if needed) or raise ``DataDirInUseError``."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DataDirInUseError(
                f"the data directory {os.path.dirname(self.path)} is in use by another process"
                f"{f' (pid {holder})' if holder else ''}: one node per data directory") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode().strip()))
    return ""
