"""Leader epoch cache: assignment, end offsets and truncation on both ends."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.epochs import UNKNOWN_EPOCH, EpochEntry, LeaderEpochCache
from segments.errors import StaleLeaderEpochError


def cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(list(entries))
    assert c.entries == [EpochEntry(*e) for e in entries]
    return c


def test_empty_cache() -> None:
    c = LeaderEpochCache()
    assert c.entries == [] and c.latest_epoch == UNKNOWN_EPOCH
    assert not c.truncate_from_end(0) and not c.truncate_from_start(10)


def test_assign() -> None:
    c = LeaderEpochCache()
    assert c.assign(1, 0)
    assert c.assign(3, 10)
    assert not c.assign(3, 50)  # same epoch: nothing changes, not even its start
    assert c.entries == [(1, 0), (3, 10)] and c.latest_epoch == 3
    assert c.assign(4, 10)  # a newer epoch may start where the previous one did
    assert c.entries == [(1, 0), (3, 10), (4, 10)]
    entries = c.entries
    entries.clear()  # the property is a copy
    assert c.latest_epoch == 4


def test_newer_epoch_starting_earlier_drops_what_it_overwrites() -> None:
    c = cache((1, 0), (2, 10), (3, 20))
    assert c.assign(5, 15)
    assert c.entries == [(1, 0), (2, 10), (5, 15)]
    assert c.assign(6, 10)
    assert c.entries == [(1, 0), (6, 10)]
    assert c.assign(7, 0)
    assert c.entries == [(7, 0)]


def test_stale_epoch_raises() -> None:
    c = cache((2, 0), (5, 30))
    with pytest.raises(StaleLeaderEpochError) as info:
        c.assign(4, 40)
    assert (info.value.epoch, info.value.latest_epoch) == (4, 5)
    with pytest.raises(StaleLeaderEpochError):
        c.assign(1, 0)
    assert c.entries == [(2, 0), (5, 30)]
    with pytest.raises(StaleLeaderEpochError):
        LeaderEpochCache([(3, 0), (2, 5)])  # an out-of-order checkpoint


def test_truncate_from_end() -> None:
    c = cache((1, 0), (3, 10), (4, 10), (7, 25))
    assert not c.truncate_from_end(26)
    assert c.truncate_from_end(25)
    assert c.entries == [(1, 0), (3, 10), (4, 10)]
    assert c.truncate_from_end(11) is False
    assert c.truncate_from_end(10)
    assert c.entries == [(1, 0)] and c.latest_epoch == 1
    assert c.assign(2, 5)  # after truncation an epoch older than the dropped ones is accepted
    assert c.truncate_from_end(0)
    assert c.entries == [] and c.latest_epoch == UNKNOWN_EPOCH


def test_truncate_from_start() -> None:
    c = cache((1, 0), (3, 10), (4, 10), (7, 25))
    assert not c.truncate_from_start(0)
    assert c.truncate_from_start(12)
    assert c.entries == [(4, 12), (7, 25)]  # the epoch in force at 12 now starts there
    assert c.truncate_from_start(25)
    assert c.entries == [(7, 25)]
    assert not c.truncate_from_start(25)
    c = cache((1, 0), (2, 5))
    assert c.truncate_from_start(100)
    assert c.entries == [(2, 100)]


def test_truncate_from_start_moves_a_single_older_epoch() -> None:
    c = cache((1, 0), (2, 10))
    assert c.truncate_from_start(5)
    assert c.entries == [(1, 5), (2, 10)]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(0, 60)),
        st.tuples(st.just("start"), st.integers(0, 60)),
    ),
    max_size=40,
)


@given(OPS)
def test_invariants_hold_under_any_sequence(ops) -> None:
    c = LeaderEpochCache()
    for op in ops:
        before = c.entries
        if op[0] == "assign":
            _, epoch, start = op
            if before and epoch < before[-1].epoch:
                with pytest.raises(StaleLeaderEpochError):
                    c.assign(epoch, start)
                assert c.entries == before
                continue
            changed = c.assign(epoch, start)
            assert changed == (not before or epoch > before[-1].epoch)
            if not changed:
                assert c.entries == before
            elif before and start < before[-1].start_offset:
                assert c.entries == [e for e in before if e.start_offset < start] + [(epoch, start)]
            else:
                assert c.entries == [*before, (epoch, start)]
        elif op[0] == "end":
            changed = c.truncate_from_end(op[1])
            assert c.entries == [e for e in before if e.start_offset < op[1]]
            assert changed == (c.entries != before)
        else:
            changed = c.truncate_from_start(op[1])
            assert changed == (c.entries != before)
            assert [e for e in c.entries if e.start_offset > op[1]] == [e for e in before if e.start_offset > op[1]]
        epochs = [e.epoch for e in c.entries]
        starts = [e.start_offset for e in c.entries]
        assert all(a < b for a, b in itertools.pairwise(epochs))
        assert all(a <= b for a, b in itertools.pairwise(starts))
        assert c.latest_epoch == (epochs[-1] if epochs else UNKNOWN_EPOCH)
        rebuilt = LeaderEpochCache([tuple(e) for e in c.entries])  # a checkpoint round-trip
        assert rebuilt.entries == c.entries
