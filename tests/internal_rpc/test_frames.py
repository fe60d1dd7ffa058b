"""The internal RPC's frames: every map we send comes back equal; bytes that are not a map are
a ``FrameError`` (the connection ends), never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from internal_rpc.frames import HEADER, MESSAGE_BYTES_MAX, FrameError, body_length, encode, unpack

VALUES = st.one_of(st.integers(-2**63, 2**64 - 1), st.binary(max_size=64), st.text(max_size=16), st.none(),
                  st.lists(st.integers(-2**63, 2**63 - 1), max_size=4))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), VALUES, max_size=6))
def test_frames_round_trip(message):
    header, body = encode(message)
    assert body_length(header) == len(body) and unpack(body) == message


@given(st.binary(max_size=64))
def test_unpack_refuses_what_is_not_a_map_with_a_frame_error(data):
    try:
        value = unpack(data)
    except FrameError:
        return
    assert isinstance(value, dict)


def test_a_header_past_the_limit_is_a_frame_error():
    assert body_length(HEADER.pack(MESSAGE_BYTES_MAX)) == MESSAGE_BYTES_MAX
    with pytest.raises(FrameError):
        body_length(HEADER.pack(MESSAGE_BYTES_MAX + 1))


def test_a_body_nested_past_the_decoders_depth_is_a_frame_error():
    with pytest.raises(FrameError):
        unpack(b"\x91" * 100_000 + b"\xc0")
    with pytest.raises(FrameError):
        unpack(b"\x81\xa1\x80\xc0")  # a key that is not UTF-8
