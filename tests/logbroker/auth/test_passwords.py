"""scrypt password hashes: right passwords match, anything else does not, malformed hashes fail closed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.errors import InvalidUserError
from logbroker.auth.passwords import DUMMY_HASH, check_password, hash_password, validate_password


def test_hash_matches_its_password_only_and_salts_differ():
    stored = hash_password("correct horse")
    assert stored.startswith("scrypt$16384$8$1$")
    assert check_password("correct horse", stored)
    assert not check_password("correct horsE", stored)
    assert hash_password("correct horse") != stored, "a fresh salt per hash"
    assert "correct horse" not in stored


@settings(max_examples=10)
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_different_passwords_do_not_match(a, b):
    stored = hash_password(a, salt=b"s" * 16)
    assert check_password(b, stored) == (a == b)


@pytest.mark.parametrize("stored", ["", "scrypt$1$2$3", "bcrypt$16384$8$1$AAAA$AAAA", "scrypt$x$8$1$AAAA$AAAA",
                                    "scrypt$16384$8$1$!!!!$AAAA", "scrypt$1099511627776$8$1$AAAA$" + "A" * 44,
                                    DUMMY_HASH[:-4] + "AAAA"])
def test_malformed_or_hostile_hashes_never_match(stored):
    assert not check_password("not-a-real-password", stored)


def test_dummy_hash_is_well_formed_but_matches_no_real_password():
    assert check_password("not-a-real-password", DUMMY_HASH)
    assert not check_password("admin", DUMMY_HASH)


@pytest.mark.parametrize("password", [None, 12345678, "short", "x" * 1025])
def test_bad_passwords_are_refused(password):
    with pytest.raises(InvalidUserError):
        validate_password(password)
