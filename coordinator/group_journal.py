"""The embedded coordinator's consumer-group records (owner and grants, decision 0170), kept in
``<data_dir>/groups.jsonl`` so that claiming a group costs one appended line, not a rewrite of
``coordinator.json`` (groups can number a hundred thousand; topics and users do not).

Each line is ``{"name": group, "record": {owner, acl, created_ms} | null}`` (null: deleted); the
newest line of a name wins. A change is appended and fsynced before it is applied in memory.
When the file holds more than ``max(COMPACT_LINES_MIN, COMPACT_GROWTH * live)`` lines it is
rewritten atomically with one line per live group, so its size stays proportional to the groups
and each change costs O(1) amortized. A torn last line (a crash during an append) is dropped on
load; any other unreadable line is an error, never a silent loss of an owner.

Concurrency: the caller (``LocalCoordinator``) serializes changes under its lock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from coordinator.errors import CoordinatorError
from coordinator.users import GroupRecord
from segments.checkpoint import write_atomic
from segments.errors import StorageFullError, is_no_space

JOURNAL_FILE: Final = "groups.jsonl"
JOURNAL_LINE_BYTES_MAX: Final = 1024 * 1024
JOURNAL_FILE_MODE: Final = 0o600
COMPACT_LINES_MIN: Final = 1_000
COMPACT_GROWTH: Final = 4


class GroupJournal:
    def __init__(self, data_dir: str, fsync: Callable[[int], None] = os.fsync) -> None:
        self._path = os.path.join(data_dir, JOURNAL_FILE)
        self._fsync = fsync
        self._lines = 0

    def load(self) -> dict[str, GroupRecord]:
        """Every live group record; drops a torn last line."""
        groups: dict[str, GroupRecord] = {}
        if not os.path.exists(self._path):
            return groups
        with open(self._path, "rb") as f:
            good = 0
            for number, line in enumerate(iter(lambda: f.readline(JOURNAL_LINE_BYTES_MAX + 1), b""), 1):
                if not line.endswith(b"\n"):
                    if f.read(1) == b"":
                        break  # a torn last append: it was never acknowledged
                    raise CoordinatorError(f"{self._path} line {number} is longer than {JOURNAL_LINE_BYTES_MAX} bytes")
                try:
                    entry = json.loads(line)
                    name, raw = entry["name"], entry["record"]
                    if raw is None:
                        groups.pop(name, None)
                    else:
                        groups[name] = GroupRecord.from_json(name, raw)
                except (ValueError, KeyError, TypeError, CoordinatorError) as exc:
                    raise CoordinatorError(f"{self._path} line {number} is unreadable: {exc}") from exc
                good += len(line)
                self._lines += 1
        if good != os.path.getsize(self._path):
            with open(self._path, "r+b") as f:
                f.truncate(good)
        return groups

    def write(self, changes: Iterable[tuple[str, GroupRecord | None]], live: Mapping[str, GroupRecord]) -> None:
        """Append ``changes`` durably (``live``: every group once they apply; the first write and
        compactions write it whole, atomically)."""
        lines = [_line(name, record) for name, record in changes]
        try:
            if not self._lines or self._lines + len(lines) > max(COMPACT_LINES_MIN, COMPACT_GROWTH * len(live)):
                write_atomic(self._path, b"".join(_line(n, r) for n, r in sorted(live.items())), self._fsync,
                             mode=JOURNAL_FILE_MODE)
                self._lines = len(live)
                return
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, JOURNAL_FILE_MODE)
            try:
                data = memoryview(b"".join(lines))
                while data:
                    data = data[os.write(fd, data):]
                self._fsync(fd)
            finally:
                os.close(fd)
            self._lines += len(lines)
        except OSError as exc:
            if is_no_space(exc):
                raise StorageFullError(f"group owners not saved: {exc}") from exc
            raise


def _line(name: str, record: GroupRecord | None) -> bytes:
    body = {"name": name, "record": None if record is None else record.to_json()}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode() + b"\n"
