"""``kafka_api.sasl``: the PLAIN and OAUTHBEARER messages, and what is refused."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_api import sasl


def test_plain_gives_the_username_and_password():
    assert sasl.parse("PLAIN", b"\x00alice\x00secret") == sasl.Password("alice", "secret")
    assert sasl.parse("PLAIN", b"alice\x00alice\x00secret") == sasl.Password("alice", "secret")


@pytest.mark.parametrize("message", [b"alice\x00secret", b"\x00\x00secret", b"\x00alice\x00",
                                     b"bob\x00alice\x00secret", b"\x00a\x00b\x00c", b"\xff\x00a\x00b"])
def test_plain_refuses_what_is_not_one_user_proving_themselves(message: bytes):
    with pytest.raises(sasl.SaslError):
        sasl.parse("PLAIN", message)


def test_oauthbearer_gives_the_token():
    assert sasl.parse("OAUTHBEARER", b"n,,\x01auth=Bearer tok.en\x01\x01") == sasl.Bearer("tok.en")
    assert sasl.parse("OAUTHBEARER", b"n,a=alice,\x01host=x\x01auth=Bearer t\x01\x01") == sasl.Bearer("t")


@pytest.mark.parametrize("message", [b"auth=Bearer t\x01\x01", b"n,,\x01auth=Bearer t\x01",
                                     b"n,,\x01auth=Basic t\x01\x01", b"n,,\x01auth=Bearer \x01\x01", b"n,,\x01\x01"])
def test_oauthbearer_refuses_malformed_messages(message: bytes):
    with pytest.raises(sasl.SaslError):
        sasl.parse("OAUTHBEARER", message)


def test_other_mechanisms_and_huge_messages_are_refused():
    with pytest.raises(sasl.SaslError):
        sasl.parse("SCRAM-SHA-256", b"n,,n=a,r=x")
    with pytest.raises(sasl.SaslError):
        sasl.parse("PLAIN", b"\x00a\x00" + b"x" * sasl.MESSAGE_BYTES_MAX)


@given(st.sampled_from(sasl.MECHANISMS), st.binary(max_size=200))
def test_any_bytes_parse_or_are_refused_cleanly(mechanism: str, message: bytes):
    with contextlib.suppress(sasl.SaslError):
        sasl.parse(mechanism, message)
