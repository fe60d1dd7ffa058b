"""The group journal: the newest line of a group wins, a torn last append is dropped, other
damage is an error, and compaction keeps the file proportional to the live groups."""

from __future__ import annotations

import os

import pytest

from coordinator.errors import CoordinatorError
from coordinator.group_journal import COMPACT_GROWTH, COMPACT_LINES_MIN, JOURNAL_FILE, GroupJournal
from coordinator.users import GroupRecord


def record(name: str, owner: str = "alice") -> GroupRecord:
    return GroupRecord(name, owner, {"bob": frozenset({"read"})}, 7)


def test_changes_replay_and_a_torn_tail_is_dropped(tmp_path):
    journal = GroupJournal(str(tmp_path))
    assert journal.load() == {}
    live: dict[str, GroupRecord] = {}
    for change in (("a", record("a")), ("b", record("b")), ("a", record("a", "carol")), ("b", None)):
        name, value = change
        if value is None:
            live.pop(name)
        else:
            live[name] = value
        journal.write([change], live)
    assert GroupJournal(str(tmp_path)).load() == {"a": record("a", "carol")}
    path = tmp_path / JOURNAL_FILE
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b'{"name":"c","record":{"owner":')
    reopened = GroupJournal(str(tmp_path))
    assert reopened.load() == {"a": record("a", "carol")}
    assert path.stat().st_size == size, "the torn line was cut off"
    reopened.write([("c", record("c"))], {"a": record("a", "carol"), "c": record("c")})
    assert set(GroupJournal(str(tmp_path)).load()) == {"a", "c"}


def test_a_damaged_line_before_the_end_is_an_error(tmp_path):
    journal = GroupJournal(str(tmp_path))
    journal.write([("a", record("a"))], {"a": record("a")})
    journal.write([("b", record("b"))], {"a": record("a"), "b": record("b")})
    data = (tmp_path / JOURNAL_FILE).read_bytes()
    (tmp_path / JOURNAL_FILE).write_bytes(b"not json\n" + data)
    with pytest.raises(CoordinatorError, match="line 1"):
        GroupJournal(str(tmp_path)).load()


def test_compaction_keeps_the_file_proportional_to_the_live_groups(tmp_path):
    journal = GroupJournal(str(tmp_path), fsync=lambda fd: None)  # thousands of writes: no real fsyncs
    live = {"keep": record("keep")}
    journal.write([("keep", live["keep"])], live)
    churn = 3 * COMPACT_LINES_MIN
    for i in range(churn):  # claim and delete the same name over and over
        name = f"g{i}"
        live[name] = record(name)
        journal.write([(name, live[name])], live)
        del live[name]
        journal.write([(name, None)], live)
    lines = (tmp_path / JOURNAL_FILE).read_bytes().count(b"\n")
    assert lines <= max(COMPACT_LINES_MIN, COMPACT_GROWTH * len(live)) + 1
    assert GroupJournal(str(tmp_path)).load() == {"keep": record("keep")}
    assert oct(os.stat(tmp_path / JOURNAL_FILE).st_mode & 0o777) == "0o600"
