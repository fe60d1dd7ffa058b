"""Kafka's request framing (pure): a request is a 4-byte big-endian size, then a header (API key,
version, correlation id, client id; the flexible versions add tagged fields) and the API's body.
A response is a size, the correlation id (plus an empty tagged-field section for flexible
versions, except ApiVersions, whose response header is always v0 so that any client can read it)
and the body.

Invariants: a size outside ``[HEADER_BYTES_MIN, size_max]`` is refused before anything is read or
allocated (``FrameError``: the connection closes, as a Kafka broker does); a header is read only
from the bytes present (``HeaderError``: a clean error, never an ``IndexError``).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from typing import Final

SIZE: Final = struct.Struct(">i")
HEADER_FIXED: Final = struct.Struct(">hhi")  # api_key, api_version, correlation_id
STRING_LENGTH: Final = struct.Struct(">h")
HEADER_BYTES_MIN: Final = HEADER_FIXED.size + STRING_LENGTH.size
CLIENT_ID_CHARS_MAX: Final = 1_000
TAGGED_FIELDS_MAX: Final = 100


class FrameError(ValueError):
    """A frame no Kafka client sends: the connection is closed."""


class HeaderError(ValueError):
    """A request header that cannot be read."""


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts in the frame


def frame_size(prefix: bytes, size_max: int, *, size_min: int = HEADER_BYTES_MIN) -> int:
    """The size a frame's 4-byte prefix announces; ``FrameError`` when no request can be that size
    (``size_min``: 0 for a bare SASL message)."""
    (size,) = SIZE.unpack(prefix)
    if size < size_min:
        raise FrameError(f"a request of {size} bytes is shorter than any request header")
    if size > size_max:
        raise FrameError(f"a request of {size} bytes is over this listener's limit of {size_max}")
    return int(size)


def peek_key(frame: bytes | memoryview) -> tuple[int, int, int]:
    """API key, version and correlation id: the fixed part every header version starts with."""
    if len(frame) < HEADER_FIXED.size:
        raise HeaderError("the request header is truncated")
    api_key, api_version, correlation_id = HEADER_FIXED.unpack_from(frame, 0)
    return int(api_key), int(api_version), int(correlation_id)


def read_header(frame: bytes | memoryview, *, flexible: bool) -> RequestHeader:
    """The request header (v1, or v2 when the API version is ``flexible``)."""
    api_key, api_version, correlation_id = peek_key(frame)
    offset = HEADER_FIXED.size
    if len(frame) < offset + STRING_LENGTH.size:
        raise HeaderError("the request header is truncated")
    (length,) = STRING_LENGTH.unpack_from(frame, offset)
    offset += STRING_LENGTH.size
    client_id: str | None = None
    if length >= 0:
        if length > CLIENT_ID_CHARS_MAX * 4 or offset + length > len(frame):
            raise HeaderError("the client id runs past the request")
        try:
            client_id = bytes(frame[offset:offset + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderError("the client id is not UTF-8") from None
        offset += length
    elif length != -1:
        raise HeaderError(f"a client id of length {length}")
    if flexible:
        offset = skip_tagged_fields(frame, offset)
    return RequestHeader(api_key, api_version, correlation_id, client_id, offset)


def read_uvarint(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes) and the offset after it."""
    value = shift = 0
    for _ in range(5):
        if offset >= len(data):
            raise HeaderError("a varint runs past the request")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
    raise HeaderError("a varint longer than 5 bytes")


def skip_tagged_fields(data: bytes | memoryview, offset: int) -> int:
    count, offset = read_uvarint(data, offset)
    if count > TAGGED_FIELDS_MAX:
        raise HeaderError(f"{count} tagged fields in a header")
    for _ in range(count):
        _, offset = read_uvarint(data, offset)
        size, offset = read_uvarint(data, offset)
        offset += size
        if offset > len(data):
            raise HeaderError("a tagged field runs past the request")
    return offset


def response_frame(correlation_id: int, body: bytes | Sequence[bytes | bytearray | memoryview], *,
                   flexible_header: bool) -> bytes:
    """A whole response: size, header (v1 with an empty tagged-field section when
    ``flexible_header``, else v0) and ``body`` (its bytes, or parts that join into them: each
    copied once, into the frame)."""
    header = SIZE.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    if isinstance(body, bytes):
        return SIZE.pack(len(header) + len(body)) + header + body
    size = len(header) + sum(map(len, body))  # bytes: a memoryview part is one of bytes (``hot_codecs``)
    return b"".join((SIZE.pack(size), header, *body))


def host_port(address: str) -> tuple[str, int] | None:
    """A node's advertised ``HOST:PORT`` (IPv6 in brackets) as Kafka's broker fields; None when it
    has none (no Kafka listener)."""
    host, _, port = address.rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None
