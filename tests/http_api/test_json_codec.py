"""``http_api.json_codec`` and ``load_json``: one set of JSON rules for every body and answer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from http_api.json_codec import decode, encode, json_response
from http_api.params import load_json
from logbroker.errors import InvalidRequestError

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20)


@given(JSON_VALUES)
def test_what_is_encoded_reads_back_the_same_with_any_json_parser(value: object) -> None:
    raw = encode(value)
    assert json.loads(raw) == value
    assert decode(raw) == value


def test_answers_are_compact_utf8_with_a_charset() -> None:
    response = json_response({"name": "café", "n": [1, 2]}, status=201, headers={"X-A": "b"})
    assert response.body == '{"name":"café","n":[1,2]}'.encode()
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert response.status == 201 and response.headers["X-A"] == "b"


def test_a_bom_is_skipped() -> None:
    assert load_json(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


@pytest.mark.parametrize("raw", [b"NaN", b'{"x": Infinity}', b"[-Infinity]", b"1e400", b"[1,", b"", b"{'a': 1}"])
def test_what_is_not_json_is_refused(raw: bytes) -> None:
    with pytest.raises(InvalidRequestError, match="not valid JSON"):
        load_json(raw)


def test_a_lone_surrogate_gets_its_own_message_and_a_pair_is_text() -> None:
    with pytest.raises(InvalidRequestError, match="lone UTF-16 surrogate"):
        load_json(b'{"value": "\\ud800"}')
    with pytest.raises(InvalidRequestError, match="lone UTF-16 surrogate"):
        load_json(b'{"\\udfff": 1}')
    assert load_json(b'"\\ud83d\\ude00"') == "\U0001F600"


def test_bytes_that_are_not_utf8_are_refused_as_such() -> None:
    with pytest.raises(InvalidRequestError, match="not UTF-8"):
        load_json(b'{"value": "\xff"}')


def test_nan_in_an_answer_is_never_sent_as_nan() -> None:
    assert encode({"x": float("nan")}) == b'{"x":null}'
