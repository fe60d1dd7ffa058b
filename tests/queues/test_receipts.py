"""Receipts and queue bodies (pure parsing): round trips, and anything else is a clear 400."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import InvalidRequestError
from logbroker.queues.requests import Receipt, parse_receipt, parse_receipts, parse_receive


@given(st.integers(0, 10**9 - 1), st.integers(0, 2**63 - 1), st.integers(1, 2**63 - 1))
def test_receipts_round_trip(partition, offset, token):
    receipt = Receipt(partition, offset, token)
    assert parse_receipt(str(receipt)) == receipt


@given(st.one_of(st.text(max_size=40), st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2)))
def test_anything_else_is_invalid_or_a_receipt(raw):
    shaped = isinstance(raw, str) and re.fullmatch(r"[0-9]{1,9}\.[0-9]{1,19}\.[0-9a-f]{1,16}", raw) is not None
    try:
        parsed = parse_receipt(raw)
    except InvalidRequestError:
        assert not shaped or raw.rsplit(".", 1)[1].strip("0") == ""
        return
    assert shaped and parsed.token != 0 and parse_receipt(str(parsed)) == parsed


@pytest.mark.parametrize("body", [None, [], {"receipts": "x"}, {"receipts": ["1.2.3"], "other": 1},
                                  {"receipts": ["1.2.3", "1.2.3"]}, {"receipts": ["1.2.0"]}])
def test_bad_ack_bodies(body):
    with pytest.raises(InvalidRequestError):
        parse_receipts(body, nack=False)


def test_receive_defaults_and_bounds():
    assert parse_receive({}, 30_000) == parse_receive({"max_messages": 10, "wait_ms": 0}, 30_000)
    with pytest.raises(InvalidRequestError):
        parse_receive({"wait_ms": 30_001}, 30_000)
