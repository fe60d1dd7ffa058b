"""``SortedNames`` (the group list's order) agrees with a sorted set through adds, removals and
pages from any cursor, with chunks small enough that they split and empty often."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.groups import names as names_module
from logbroker.groups.names import SortedNames

NAMES = st.text(alphabet="abcz", min_size=1, max_size=4)
OPS = st.lists(st.tuples(st.sampled_from(("add", "discard")), NAMES), max_size=200)


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names_module, "CHUNK", 2)


@settings(max_examples=300, deadline=None)
@given(ops=OPS, cursor=st.none() | NAMES, count=st.integers(1, 30))
def test_agrees_with_a_sorted_set(ops: list[tuple[str, str]], cursor: str | None, count: int) -> None:
    index, model = SortedNames(), set[str]()
    for op, name in ops:
        if op == "add":
            index.add(name)
            model.add(name)
        else:
            index.discard(name)
            model.discard(name)
        index.verify()
        assert len(index) == len(model) and (name in index) == (name in model)
    expected = sorted(n for n in model if cursor is None or n > cursor)
    assert index.after(cursor, count) == (expected[:count], len(expected) > count)


@settings(max_examples=100, deadline=None)
@given(names=st.sets(NAMES, max_size=60), count=st.integers(1, 7))
def test_following_the_last_name_walks_everything_once(names: set[str], count: int) -> None:
    index = SortedNames()
    for name in names:
        index.add(name)
    walked: list[str] = []
    cursor = None
    while True:
        page, more = index.after(cursor, count)
        walked += page
        if not more:
            break
        cursor = page[-1]
    assert walked == sorted(names)
