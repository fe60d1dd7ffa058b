"""The key ring file: its format round trips, unsafe modes and bad lines are refused clearly."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.key_ring import KeyRing, KeyRingError, format_ring, load_ring, parse_ring, write_ring

KEYS = st.dictionaries(st.integers(1, 2**32 - 1), st.binary(min_size=32, max_size=32), min_size=1, max_size=8)


@given(KEYS, st.data())
def test_format_and_parse_round_trip(keys: dict[int, bytes], data: st.DataObject) -> None:
    ring = KeyRing(keys, data.draw(st.sampled_from(sorted(keys))))
    assert parse_ring(format_ring(ring)) == ring


def test_written_ring_is_0600_and_loads(tmp_path: Path) -> None:
    path = str(tmp_path / "keys")
    ring = KeyRing({1: os.urandom(32)}, 1)
    write_ring(path, ring)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_ring(path) == ring
    rotated = ring.rotated(os.urandom(32))
    assert rotated.current == 2 and set(rotated.keys) == {1, 2}


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_a_ring_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = str(tmp_path / "keys")
    write_ring(path, KeyRing({1: os.urandom(32)}, 1))
    os.chmod(path, mode)
    with pytest.raises(KeyRingError, match="chmod 600"):
        load_ring(path)


@pytest.mark.parametrize(("text", "match"), [
    ("key 1 " + "A" * 44 + "\n", "no 'current ID'"),
    ("current 2\nkey 1 " + "AQ" * 21 + "AQ==\n", "not in the ring|bytes"),
    ("current 1\nkey 1 c2hvcnQ=\n", "5 bytes"),
    ("current 1\nkey x AAAA\n", "line 2"),
    ("current 1\ncurrent 1\n", "line 2"),
    ("current 1\nkey 0 " + "A" * 43 + "=\n", "outside"),
])
def test_bad_rings_say_what_is_wrong(text: str, match: str) -> None:
    with pytest.raises(KeyRingError, match=match):
        parse_ring(text)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KeyRingError, match="cannot open the key ring"):
        load_ring(str(tmp_path / "absent"))


def test_repr_never_shows_keys() -> None:
    key = b"\x07" * 32
    assert "7" not in repr(KeyRing({1: key}, 1)).replace("ids=[1]", "")
