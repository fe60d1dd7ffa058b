"""Kafka record bytes written by hand, independent of the codecs under test: a bug in a module's
encoder cannot then hide the same bug in its decoder."""

from __future__ import annotations


def zigzag(value: int) -> bytes:
    """``value`` as Kafka's zigzag LEB128 varint (shortest form)."""
    unsigned = (value << 1) ^ (value >> 63)
    out = bytearray()
    while unsigned >= 0x80:
        out.append(0x80 | (unsigned & 0x7F))
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def blob(data: bytes | None) -> bytes:
    """A nullable byte string: its length (-1 for null), then the bytes."""
    return zigzag(-1) if data is None else zigzag(len(data)) + data


def raw_record(offset_delta: int, *, ts_delta: int = 0, key: bytes | None = b"k", value: bytes | None = b"v",
               headers: bytes = b"\x00", length: int | None = None, attributes: bytes = b"\x00") -> bytes:
    """One record; ``length`` overrides its length prefix, ``attributes`` its attributes byte(s)."""
    body = attributes + zigzag(ts_delta) + zigzag(offset_delta) + blob(key) + blob(value) + headers
    return zigzag(len(body) if length is None else length) + body
