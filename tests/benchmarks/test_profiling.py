"""Collapsed-stack profiles reduce to the frames with the most samples."""

from __future__ import annotations

import pytest

from benchmarks.profiling import top_frames


def test_self_and_inclusive_shares():
    lines = ["main;serve;decode 6\n", "main;serve;write 3\n", "main;idle 1\n", "\n", "garbage line\n"]
    total, own, inclusive = top_frames(lines)
    assert total == 10
    assert own == [("decode", 60.0), ("write", 30.0), ("idle", 10.0)]
    assert dict(inclusive) == {"main": 100.0, "serve": 90.0, "decode": 60.0, "write": 30.0, "idle": 10.0}
    assert inclusive[0] == ("main", 100.0)


def test_a_frame_repeated_in_one_stack_counts_once_inclusive():
    total, own, inclusive = top_frames(["a;b;a 4\n"])
    assert total == 4 and own == [("a", 100.0)] and dict(inclusive) == {"a": 100.0, "b": 100.0}


def test_frames_with_spaces_keep_their_names_and_limit_applies():
    lines = [f"run (x.py:1);f{i} (y.py:{i}) {10 - i}\n" for i in range(5)]
    total, own, _ = top_frames(lines, limit=2)
    assert total == sum(range(6, 11))
    assert own == [("f0 (y.py:0)", pytest.approx(100 * 10 / 40)), ("f1 (y.py:1)", pytest.approx(100 * 9 / 40))]


def test_an_empty_profile_has_no_frames():
    assert top_frames([]) == (0, [], [])
