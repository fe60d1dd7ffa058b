"""``kafka_api.wire``: request framing and headers, including every way a frame can be cut or lie."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_api import wire


def header_v1(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    fixed = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return fixed + struct.pack(">h", -1)
    return fixed + struct.pack(">h", len(client_id)) + client_id


def test_a_v1_header_is_read_with_where_the_body_starts():
    frame = header_v1(3, 12, 77, b"rdkafka") + b"BODY"
    header = wire.read_header(frame, flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 77, "rdkafka")
    assert frame[header.body_offset:] == b"BODY"


def test_a_v2_header_skips_its_tagged_fields():
    frame = header_v1(18, 3, 1, None) + b"\x02" + b"\x00\x01x" + b"\x05\x02yz" + b"BODY"
    header = wire.read_header(frame, flexible=True)
    assert header.client_id is None
    assert frame[header.body_offset:] == b"BODY"


def test_sizes_outside_the_bounds_are_refused_before_reading():
    with pytest.raises(wire.FrameError):
        wire.frame_size(struct.pack(">i", -1), 1000)
    with pytest.raises(wire.FrameError):
        wire.frame_size(struct.pack(">i", 2**31 - 1), 1000)
    with pytest.raises(wire.FrameError):
        wire.frame_size(struct.pack(">i", 3), 1000)
    assert wire.frame_size(struct.pack(">i", 1000), 1000) == 1000


@given(st.binary(max_size=64), st.booleans())
def test_any_bytes_give_a_header_or_a_header_error(frame: bytes, flexible: bool):
    try:
        header = wire.read_header(frame, flexible=flexible)
    except wire.HeaderError:
        return
    assert 0 <= header.body_offset <= len(frame)


@given(st.integers(0, 2**15 - 1), st.integers(-1, 2**15 - 1), st.integers(-(2**31), 2**31 - 1),
       st.one_of(st.none(), st.text(max_size=40)))
def test_headers_read_back(api_key: int, version: int, correlation_id: int, client_id: str | None):
    raw = None if client_id is None else client_id.encode()
    frame = header_v1(api_key, version, correlation_id, raw)
    for cut in range(len(frame)):
        with pytest.raises(wire.HeaderError):
            wire.read_header(frame[:cut], flexible=False)
    header = wire.read_header(frame, flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (api_key, version, correlation_id, client_id)


def test_a_response_frame_carries_its_size_and_correlation_id():
    frame = wire.response_frame(9, b"abc", flexible_header=True)
    assert frame == struct.pack(">ii", 8, 9) + b"\x00abc"
    assert wire.response_frame(9, b"abc", flexible_header=False) == struct.pack(">ii", 7, 9) + b"abc"


def test_an_advertised_address_reads_as_host_and_port():
    assert wire.host_port("127.0.0.1:9093") == ("127.0.0.1", 9093)
    assert wire.host_port("[::1]:9093") == ("::1", 9093)
    assert wire.host_port("") is None and wire.host_port("host:") is None and wire.host_port("host:x") is None
