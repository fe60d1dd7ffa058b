"""Sparse mmap indexes: the pure bisect helpers against a list model, then the files themselves."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segments.index import (
    OFFSET_ENTRY,
    TIME_ENTRY,
    OffsetIndex,
    TimeIndex,
    largest_at_most,
    valid_entry_count,
)

_names = itertools.count()
FILE_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)


def increasing(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[list[int]]:
    """Strictly increasing non-negative ints starting at 0 (the shape of an index column)."""
    gaps = st.lists(st.integers(1, 1000), min_size=max(0, min_size - 1), max_size=max_size - 1)
    return gaps.map(lambda g: list(itertools.accumulate([0, *g])))


@given(st.lists(st.integers(-50, 50), max_size=60).map(sorted), st.integers(-60, 60), st.integers(1, 70))
def test_largest_at_most_matches_the_model(keys: list[int], target: int, warm: int) -> None:
    probes: list[int] = []

    def key_at(n: int) -> int:
        assert 0 <= n < len(keys)
        probes.append(n)
        return keys[n]

    expected = max((i for i, k in enumerate(keys) if k <= target), default=-1)
    assert largest_at_most(key_at, len(keys), target, warm) == expected
    assert largest_at_most(key_at, len(keys), target) == expected
    assert len(probes) <= 2 * (2 + len(keys).bit_length())
    warm_start = max(0, len(keys) - warm)
    if keys and keys[warm_start] <= target:  # the warm tail holds the answer: search only there
        probes.clear()
        largest_at_most(key_at, len(keys), target, warm)
        assert all(n >= warm_start for n in probes[1:])


@given(increasing(min_size=1), st.integers(0, 40))
def test_valid_entry_count_finds_the_zero_tail(rels: list[int], tail: int) -> None:
    column = rels + [0] * tail
    assert valid_entry_count(column.__getitem__, len(column)) == len(rels)


def test_valid_entry_count_of_nothing() -> None:
    assert valid_entry_count(lambda n: pytest.fail("must not read"), 0) == 0


def offset_index(tmp_path, capacity: int = 64, **kw) -> OffsetIndex:
    return OffsetIndex(str(tmp_path / "00.index"), size_bytes_max=capacity * OFFSET_ENTRY.size, **kw)


def time_index(tmp_path, capacity: int = 64, **kw) -> TimeIndex:
    return TimeIndex(str(tmp_path / "00.timeindex"), size_bytes_max=capacity * TIME_ENTRY.size, **kw)


ENTRIES = [(0, 0), (5, 100), (9, 250), (20, 900)]


def test_offset_index_append_and_lookup(tmp_path) -> None:
    idx = offset_index(tmp_path)
    assert (idx.entries, idx.last(), idx.lookup(10), idx.lookup_position(10)) == (0, None, (0, 0), (0, 0))
    for rel, pos in ENTRIES:
        idx.append(rel, pos)
    assert idx.entries == 4 and idx.last() == (20, 900) and idx.writable
    cases = {0: (0, 0), 4: (0, 0), 5: (5, 100), 8: (5, 100), 9: (9, 250), 19: (9, 250), 20: (20, 900), 10**6: (20, 900)}
    for rel, expected in cases.items():
        assert idx.lookup(rel) == expected
    by_pos = {0: (0, 0), 99: (0, 0), 100: (5, 100), 249: (5, 100), 250: (9, 250), 10**6: (20, 900)}
    for pos, expected in by_pos.items():
        assert idx.lookup_position(pos) == expected
    with pytest.raises(AssertionError):
        idx.append(20, 1000)  # relative offsets must strictly increase
    idx.close()


def test_is_full(tmp_path) -> None:
    idx = OffsetIndex(str(tmp_path / "i"), size_bytes_max=3 * OFFSET_ENTRY.size + 5)
    for n in range(3):
        assert not idx.is_full()
        idx.append(n, n * 10)
    assert idx.is_full()
    idx.truncate_to_position(20)
    assert not idx.is_full() and idx.entries == 2
    idx.close()


def test_offset_index_truncate_to_position(tmp_path) -> None:
    idx = offset_index(tmp_path)
    for rel, pos in ENTRIES:
        idx.append(rel, pos)
    for position, kept in [(10**6, 4), (901, 4), (900, 3), (251, 3), (101, 2), (100, 1), (1, 1), (0, 0)]:
        idx.truncate_to_position(position)
        assert idx.entries == kept and idx.last() == (ENTRIES[kept - 1] if kept else None)
    idx.append(0, 0)
    idx.append(3, 40)  # the zero tail lets appends resume where the truncation stopped
    assert idx.lookup(100) == (3, 40)
    idx.trim()
    idx.close()
    reopened = offset_index(tmp_path)
    assert reopened.entries == 2 and reopened.last() == (3, 40)
    reopened.close()


def test_time_index_append_lookup_truncate(tmp_path) -> None:
    idx = time_index(tmp_path)
    assert idx.lookup(123) == 0
    for ts, rel in [(100, 0), (100, 3), (90, 4), (150, 5), (150, 6), (200, 5), (300, 9)]:
        idx.maybe_append(ts, rel)  # only growing timestamps with growing offsets are kept
    assert idx.entries == 3 and idx.last() == (300, 9)
    for ts, rel in {-(2**62): 0, 100: 0, 101: 0, 150: 0, 151: 5, 300: 5, 301: 9}.items():
        assert idx.lookup(ts) == rel
    idx.truncate_to_offset(10)
    assert idx.entries == 3
    idx.truncate_to_offset(9)
    assert idx.entries == 2 and idx.last() == (150, 5)
    idx.truncate_to_offset(1)
    assert idx.entries == 1
    idx.truncate_to_offset(0)
    assert idx.entries == 0 and idx.last() is None
    idx.maybe_append(-5, 0)
    assert idx.last() == (-5, 0)
    idx.close()


def test_trim_then_reopen(tmp_path) -> None:
    path = tmp_path / "00.index"
    idx = offset_index(tmp_path)
    for rel, pos in ENTRIES[:3]:
        idx.append(rel, pos)
    idx.trim()
    assert os.path.getsize(path) == 3 * OFFSET_ENTRY.size
    assert not idx.writable and idx.is_full() and idx.entries == 3 and idx.last() == (9, 250)
    assert idx.lookup(7) == (5, 100)
    with pytest.raises((AssertionError, TypeError)):
        idx.append(30, 1000)
    idx.trim()  # idempotent
    idx.close()
    for writable in (False, True):
        again = offset_index(tmp_path, writable=writable)
        assert again.entries == 3 and again.last() == (9, 250) and again.lookup(100) == (9, 250)
        assert again.writable is writable
        again.close()
    again = offset_index(tmp_path)
    again.append(12, 400)
    again.close()  # an active index reaches its file only when sealed (trim)
    assert offset_index(tmp_path, writable=False).entries == 3
    again = offset_index(tmp_path)
    again.append(12, 400)
    again.trim()
    again.close()
    again = offset_index(tmp_path, writable=False)
    assert again.entries == 4 and again.last() == (12, 400)
    again.close()


def test_trim_of_an_empty_index(tmp_path) -> None:
    idx = time_index(tmp_path)
    idx.trim()
    assert idx.entries == 0 and idx.last() is None and idx.lookup(5) == 0
    assert os.path.getsize(tmp_path / "00.timeindex") == 0
    idx.close()
    assert time_index(tmp_path, writable=False).entries == 0


def test_readonly_open_of_a_missing_file(tmp_path) -> None:
    idx = offset_index(tmp_path, writable=False)
    assert idx.entries == 0 and idx.lookup(3) == (0, 0) and idx.last() is None
    assert not (tmp_path / "00.index").exists()


@FILE_SETTINGS
@given(increasing(min_size=1, max_size=30), st.integers(30, 40), st.booleans())
def test_reopen_untrimmed_file_finds_its_entries(tmp_path, rels, capacity, use_time) -> None:
    directory = tmp_path / str(next(_names))
    directory.mkdir()
    name = "00.timeindex" if use_time else "00.index"
    entry = TIME_ENTRY if use_time else OFFSET_ENTRY
    rows = [(1000 + i, rel) for i, rel in enumerate(rels)] if use_time else [(rel, rel * 7) for rel in rels]
    expected = rows[-1]
    write_entries(directory / name, entry, rows, capacity)  # a pre-allocated file with a zero tail
    for writable in (True, False):
        again = (time_index if use_time else offset_index)(directory, capacity, writable=writable)
        assert again.entries == len(rels) and again.last() == expected
        again.close()


def write_entries(path, entry, rows, capacity: int) -> None:
    data = b"".join(entry.pack(*row) for row in rows)
    path.write_bytes(data + bytes(capacity * entry.size - len(data)))


@pytest.mark.parametrize(
    ("rows", "rel_end", "pos_end", "sane"),
    [
        ([(0, 0), (5, 100), (9, 250)], 10, 300, True),
        ([(0, 0), (5, 100), (3, 250)], 10, 300, False),  # offsets go back
        ([(0, 0), (5, 100), (9, 100)], 10, 300, False),  # positions repeat
        ([(0, 0), (5, 100), (9, 250)], 9, 300, False),  # past the log's offsets
        ([(0, 0), (5, 100), (9, 250)], 10, 250, False),  # past the log's size
        ([(0, 8), (5, 100)], 10, 300, False),  # first entry is not (0, 0)
    ],
)
def test_offset_index_is_sane(tmp_path, rows, rel_end, pos_end, sane) -> None:
    write_entries(tmp_path / "00.index", OFFSET_ENTRY, rows, 16)
    idx = offset_index(tmp_path, 16)
    assert idx.entries == len(rows)
    assert idx.is_sane(rel_end, pos_end) is sane
    idx.close()


def test_time_index_is_sane(tmp_path) -> None:
    path = tmp_path / "00.timeindex"
    for rows, rel_end, sane in [
        ([(10, 0), (20, 4), (20, 7)], 8, True),
        ([(10, 0), (5, 4)], 8, False),  # timestamps go back
        ([(10, 0), (20, 4), (30, 4)], 8, False),  # offsets repeat
        ([(10, 0), (20, 4)], 4, False),  # past the log's offsets
    ]:
        write_entries(path, TIME_ENTRY, rows, 16)
        idx = time_index(tmp_path, 16)
        assert idx.entries == len(rows) and idx.is_sane(rel_end) is sane
        idx.close()
    readonly = time_index(tmp_path, 16, writable=False)
    assert readonly.entries == 2 and readonly.is_sane(1) is False
    readonly.close()
    os.truncate(path, 0)
    empty = time_index(tmp_path, 16)
    assert empty.entries == 0 and empty.is_sane(0) is True
    empty.close()


@pytest.mark.parametrize("size", [3 * OFFSET_ENTRY.size + 5, 17 * OFFSET_ENTRY.size])
def test_odd_or_oversized_file_is_reset(tmp_path, size) -> None:
    path = tmp_path / "00.index"
    path.write_bytes(bytes([7]) * size)
    idx = offset_index(tmp_path, 16)
    assert idx.entries == 0 and idx.last() is None
    idx.append(0, 0)
    idx.append(1, 60)
    idx.trim()
    assert path.read_bytes() == OFFSET_ENTRY.pack(0, 0) + OFFSET_ENTRY.pack(1, 60)
    idx.close()
    again = offset_index(tmp_path, 16)
    assert again.entries == 2 and again.last() == (1, 60)
    again.close()
