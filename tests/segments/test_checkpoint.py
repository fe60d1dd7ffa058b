"""Checkpoint files: text round-trips, strict parsing and atomic replacement."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments import checkpoint
from segments.checkpoint import read_epochs, read_offsets, write_atomic, write_epochs, write_offsets
from segments.errors import CorruptCheckpointError

TOPICS = st.from_regex(r"[A-Za-z0-9._-]{1,200}", fullmatch=True)
OFFSETS = st.dictionaries(
    st.tuples(TOPICS, st.integers(0, 10_000)), st.integers(0, 2**63 - 1), max_size=20
)
EPOCHS = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=20)
FILE_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)


@FILE_SETTINGS
@given(OFFSETS)
def test_offsets_round_trip(tmp_path, offsets) -> None:
    path = str(tmp_path / checkpoint.RECOVERY_POINT_FILE)
    write_offsets(path, offsets)
    assert read_offsets(path) == offsets
    assert os.listdir(tmp_path) == [checkpoint.RECOVERY_POINT_FILE]


@FILE_SETTINGS
@given(EPOCHS)
def test_epochs_round_trip(tmp_path, entries) -> None:
    path = str(tmp_path / checkpoint.LEADER_EPOCH_FILE)
    write_epochs(path, entries)
    assert read_epochs(path) == entries
    assert os.listdir(tmp_path) == [checkpoint.LEADER_EPOCH_FILE]


def test_format_is_the_documented_text(tmp_path) -> None:
    path = str(tmp_path / "hw")
    write_offsets(path, {("b", 1): 7, ("a", 2): 0, ("a", 10): 3})
    with open(path, "rb") as f:
        assert f.read() == b"0\n3\na 2 0\na 10 3\nb 1 7\n"
    write_epochs(path, [(1, 0), (4, 250)])
    with open(path, "rb") as f:
        assert f.read() == b"0\n2\n1 0\n4 250\n"
    write_epochs(path, [])
    assert read_epochs(path) == [] and read_offsets(path) == {}


def test_absent_file_reads_as_empty(tmp_path) -> None:
    assert read_offsets(str(tmp_path / "nope")) == {}
    assert read_epochs(str(tmp_path / "nope")) == []


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n",
        b"0\n",
        b"\xff\xfe\x00garbage",
        b"zero\n0\n",
        b"1\n0\n",  # unknown version
        b"-1\n0\n",
        b"0\n-1\n",
        b"0\n1\n",  # one entry promised, none present
        b"0\n1\nt 0 5\nt 1 5\n",  # more lines than promised
        b"0\n2\nt 0 5\n",
        b"0\n1\nt 0 5\n\n",  # trailing blank line
        b"0\n1\nt 0\n",  # missing field
        b"0\n1\nt 0 5 6\n",  # extra field
        b"0\n1\nt  0 5\n",  # double space
        b"0\n1\nt 0 x\n",
        b"0\n1\nt 0.5 5\n",
        b"0\n1\nt -1 5\n",  # negative partition
        b"0\n1\nt 0 -5\n",  # negative offset
        b"0\n1\nt\xc3\xa9 0 5\n",  # non-ascii topic
        b"0\n1000001\n",  # more entries than ENTRIES_MAX
    ],
)
def test_corrupt_offset_checkpoints_raise(tmp_path, content) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        read_offsets(str(path))


@pytest.mark.parametrize(
    "content",
    [b"", b"0\n1\n1\n", b"0\n1\n1 2 3\n", b"0\n1\n-1 0\n", b"0\n1\n1 -7\n", b"0\n1\n1 x\n", b"2\n1\n1 0\n",
     b"0\n2\n1 0\n"],
)
def test_corrupt_epoch_checkpoints_raise(tmp_path, content) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError):
        read_epochs(str(path))


def test_an_epoch_file_is_not_an_offset_file(tmp_path) -> None:
    path = str(tmp_path / "cp")
    write_epochs(path, [(1, 0)])
    with pytest.raises(CorruptCheckpointError):
        read_offsets(path)
    write_offsets(path, {("t", 0): 1})
    with pytest.raises(CorruptCheckpointError):
        read_epochs(path)


def test_write_atomic_replaces_and_fsyncs(tmp_path) -> None:
    path = str(tmp_path / "cp")
    synced: list[int] = []
    write_atomic(path, b"old", fsync=synced.append)
    write_atomic(path, b"new" * 1000, fsync=synced.append)
    with open(path, "rb") as f:
        assert f.read() == b"new" * 1000
    assert os.listdir(tmp_path) == ["cp"]
    assert len(synced) == 4  # the temp file and the directory, per write


def test_write_atomic_keeps_the_old_file_when_fsync_fails(tmp_path) -> None:
    path = str(tmp_path / "cp")
    write_offsets(path, {("t", 0): 5})

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "injected EIO")

    with pytest.raises(OSError, match="injected"):
        write_offsets(path, {("t", 0): 6, ("u", 1): 9}, fsync=failing_fsync)
    assert read_offsets(path) == {("t", 0): 5}
    assert os.listdir(tmp_path) == ["cp"]  # the failed write removed its temp file
    write_offsets(path, {("t", 0): 7})
    assert read_offsets(path) == {("t", 0): 7}
    assert os.listdir(tmp_path) == ["cp"]


def test_long_topic_names_within_entries_max_are_readable(tmp_path, monkeypatch) -> None:
    # Scaled down: 10 entries allowed (a 640-byte read cap), 10 entries of 200-character topics.
    monkeypatch.setattr(checkpoint, "ENTRIES_MAX", 10)
    offsets = {("t" * 200, p): 2**40 + p for p in range(10)}
    path = str(tmp_path / "cp")
    write_offsets(path, offsets)
    assert read_offsets(path) == offsets
