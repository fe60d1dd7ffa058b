"""Checkpoint files, written atomically: write a temp file, fsync it, rename, fsync the directory.

Formats are line-oriented text, like Kafka's, so an operator can read them:

- offset checkpoint (``recovery-point-checkpoint``, ``high-watermark-checkpoint``)::

      0
      <count>
      <topic> <partition> <offset>

- leader epoch checkpoint (``leader-epoch-checkpoint``, per partition)::

      0
      <count>
      <epoch> <start_offset>

A reader that finds anything else raises ``CorruptCheckpointError``; a file that is absent reads
as empty. Topic names cannot contain spaces, so the fields split unambiguously.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Final

from segments.errors import CorruptCheckpointError

VERSION: Final = 0
ENTRIES_MAX: Final = 1_000_000
# A line is at most a 200-character topic, a partition number and an offset (u64), with spaces.
LINE_BYTES_MAX: Final = 256
RECOVERY_POINT_FILE: Final = "recovery-point-checkpoint"
HIGH_WATERMARK_FILE: Final = "high-watermark-checkpoint"
LEADER_EPOCH_FILE: Final = "leader-epoch-checkpoint"
TMP_SUFFIX: Final = ".tmp"


def write_atomic(path: str, data: bytes, fsync: Callable[[int], None] = os.fsync, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _render(rows: list[tuple[object, ...]]) -> bytes:
    if len(rows) > ENTRIES_MAX:
        raise CorruptCheckpointError(f"{len(rows)} entries exceed the checkpoint limit of {ENTRIES_MAX}")
    lines = [str(VERSION), str(len(rows))]
    lines.extend(" ".join(str(f) for f in row) for row in rows)
    return ("\n".join(lines) + "\n").encode()


def _parse(path: str, fields: int) -> list[list[str]]:
    try:
        with open(path, "rb") as f:
            raw = f.read(LINE_BYTES_MAX * (ENTRIES_MAX + 2))
    except FileNotFoundError:
        return []
    try:
        lines = raw.decode("ascii").splitlines()
        version, count = int(lines[0]), int(lines[1])
    except (UnicodeDecodeError, ValueError, IndexError) as exc:
        raise CorruptCheckpointError(f"{path}: unreadable header ({exc})") from exc
    if version != VERSION or not 0 <= count <= ENTRIES_MAX or len(lines) != count + 2:
        raise CorruptCheckpointError(f"{path}: version {version}, {count} entries, {len(lines) - 2} lines")
    rows = [line.split(" ") for line in lines[2:]]
    if any(len(r) != fields for r in rows):
        raise CorruptCheckpointError(f"{path}: a line does not have {fields} fields")
    return rows


def _int(path: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {text!r} is not an integer") from exc
    if value < 0:
        raise CorruptCheckpointError(f"{path}: negative value {value}")
    return value


def write_offsets(path: str, offsets: Mapping[tuple[str, int], int],
                  fsync: Callable[[int], None] = os.fsync) -> None:
    rows = [(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
    write_atomic(path, _render(rows), fsync)  # type: ignore[arg-type]


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    return {(t, _int(path, p)): _int(path, o) for t, p, o in _parse(path, 3)}


def write_epochs(path: str, entries: list[tuple[int, int]], fsync: Callable[[int], None] = os.fsync) -> None:
    write_atomic(path, _render(entries), fsync)  # type: ignore[arg-type]


def read_epochs(path: str) -> list[tuple[int, int]]:
    return [(_int(path, e), _int(path, o)) for e, o in _parse(path, 2)]
