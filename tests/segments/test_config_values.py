"""A config value a user sends as a string is a number in ASCII digits with ASCII spaces around it,
or refused with ``InvalidArgumentError`` (400): never a ``ValueError`` from ``int`` or ``float``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.config import config_float, config_int
from segments.errors import InvalidArgumentError


def test_digits_with_spaces_around_are_taken():
    assert config_int("k", " 42\n") == 42
    assert config_int("k", "-7") == -7
    assert config_float("k", "\t0.25 ") == 0.25
    assert config_float("k", "3") == 3.0


@pytest.mark.parametrize("raw", ["0\x1f", "\x1c5", "1\x85", "١٢", "5 5", "", " ", "0x10", "1e3", "+1"])
def test_anything_else_is_refused_as_invalid(raw: str):
    with pytest.raises(InvalidArgumentError):
        config_int("k", raw)
    with pytest.raises(InvalidArgumentError):
        config_float("k", raw)


@given(st.text(max_size=24))
def test_any_text_is_a_number_or_refused_as_invalid(raw: str):
    for parse in (config_int, config_float):
        try:
            value = parse("k", raw)
        except InvalidArgumentError:
            continue
        assert isinstance(value, int | float)
