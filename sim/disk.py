"""A simulated disk: the broker's files stay real files (in the run's directory), and every fsync
goes through ``SimDisk.fsync``, which records how much of each file is durable; ``crash`` then
cuts every file of a node back to what a power loss would leave.

Model (append-only files, which is what the logs are): a file's durable length is its size at its
last successful fsync, kept per inode, so a file fsynced and then renamed (the checkpoints'
write-then-rename) stays durable under its new name. At a crash each file under the directory
keeps its durable length plus, when ``tear`` is on, a seeded part of the unsynced tail (the page
cache may have written some of it back), and loses the rest; a file never fsynced keeps only such a
part (or nothing). What a crash leaves counts as durable from then on, so a second crash (of what
a dying process still wrote) cuts back to exactly it. ``fail_fsync(directory)`` makes every fsync
under it fail with ``EIO`` until ``heal_fsync`` (the log then goes offline, decision 0145).

Not modelled yet: directory entries (a file created or renamed and never covered by a directory
fsync survives the crash here, as on ext4 in practice), in-place overwrites after an fsync, slow
fsync (the hook is synchronous; a delay belongs in the executor path), and pages a failed fsync
drops before any crash.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import stat


@dataclasses.dataclass(frozen=True, slots=True)
class Cut:
    path: str
    size: int  # before the crash
    kept: int  # after it
    durable: int


class SimDisk:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._durable: dict[tuple[int, int], int] = {}  # (device, inode) -> durable length
        self._failing: set[str] = set()
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        """The broker's fsync (``Node(fsync=...)``, ``os.fsync`` inside ``virtual_world``)."""
        info = os.fstat(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        if any(path == d or path.startswith(d + os.sep) for d in self._failing):
            raise OSError(errno.EIO, f"simulated fsync failure: {path}")
        self.fsyncs += 1
        if stat.S_ISREG(info.st_mode):
            self._durable[(info.st_dev, info.st_ino)] = info.st_size

    def durable_length(self, path: str) -> int:
        info = os.stat(path)
        return self._durable.get((info.st_dev, info.st_ino), 0)

    def fail_fsync(self, directory: str) -> None:
        self._failing.add(os.path.realpath(directory))

    def heal_fsync(self, directory: str) -> None:
        self._failing.discard(os.path.realpath(directory))

    def crash(self, directory: str, *, tear: bool = True) -> list[Cut]:
        """Cut every file under ``directory`` to what survives a power loss; what was cut."""
        cuts = []
        for folder, subfolders, files in os.walk(directory):
            subfolders.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode):
                    continue
                key = (info.st_dev, info.st_ino)
                durable = self._durable.get(key, 0)
                if info.st_size <= durable:
                    continue
                kept = durable + (self._rng.randint(0, info.st_size - durable) if tear else 0)
                self._durable[key] = kept  # what the crash left is what the disk holds
                if kept < info.st_size:
                    os.truncate(path, kept)
                    cuts.append(Cut(path, info.st_size, kept, durable))
        return cuts
