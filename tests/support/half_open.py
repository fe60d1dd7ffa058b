"""Half-open gRPC calls over raw HTTP/2, as a hostile peer opens them: a call's headers are sent,
its request message never is. The socket is bound to a chosen source address (any of 127.0.0.0/8
on Linux), so a test can tell one peer address from another on one machine.

Only what that needs is spoken: the client preface, empty SETTINGS, HEADERS in HPACK literals
without indexing (RFC 7541 §6.2.2, no Huffman coding), and the answers a peer owes (SETTINGS ACK,
PING ACK). Frames from the server are read only for when each stream ended: a HEADERS or DATA frame
with END_STREAM, a RST_STREAM, or a GOAWAY for the streams it covers.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from typing import Final

PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _integer(value: int, prefix_bits: int) -> bytes:
    """An HPACK integer with a ``prefix_bits`` prefix whose high bits are zero (RFC 7541 §5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = bytearray([limit]), value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def header_block(headers: list[tuple[str, str]]) -> bytes:
    out = bytearray()
    for name, value in headers:
        out += b"\x00"  # literal without indexing, new name
        for text in (name.encode(), value.encode()):
            out += _integer(len(text), 7) + text
    return bytes(out)


class HalfOpenConnection:
    """One HTTP/2 connection from ``source`` holding calls whose request never comes."""

    def __init__(self, host: str, port: int, source: str) -> None:
        self.host, self.port, self.source = host, port, source
        self.opened: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self._next_stream = 1
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> HalfOpenConnection:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port,
                                                                   local_addr=(self.source, 0))
        self._writer.write(PREFACE + _frame(SETTINGS, 0, 0))
        await self._writer.drain()
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._writer is not None and self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()

    async def open_call(self, path: str, authorization: str | None = None) -> int:
        """Send one call's headers and nothing more; its stream id."""
        assert self._writer is not None
        stream, self._next_stream = self._next_stream, self._next_stream + 2
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path),
                   (":authority", f"{self.host}:{self.port}"), ("content-type", "application/grpc"),
                   ("te", "trailers")]
        if authorization:
            headers.append(("authorization", authorization))
        self._writer.write(_frame(HEADERS, END_HEADERS, stream, header_block(headers)))
        self.opened[stream] = time.monotonic()
        await self._writer.drain()
        return stream

    def open_streams(self) -> list[int]:
        return [stream for stream in self.opened if stream not in self.ended]

    async def _read(self) -> None:
        assert self._reader is not None and self._writer is not None
        try:
            while True:
                head = await self._reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFF_FFFF
                payload = await self._reader.readexactly(length)
                now = time.monotonic()
                if kind == SETTINGS and not flags & ACK:
                    self._writer.write(_frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    self._writer.write(_frame(PING, ACK, 0, payload))
                elif kind == RST_STREAM or (kind in (HEADERS, DATA) and flags & END_STREAM):
                    self.ended.setdefault(stream, now)
                elif kind == GOAWAY:
                    last = int.from_bytes(payload[:4], "big") & 0x7FFF_FFFF
                    for opened in self.opened:
                        if opened > last:
                            self.ended.setdefault(opened, now)
        except (asyncio.IncompleteReadError, ConnectionError):
            now = time.monotonic()
            for opened in self.opened:  # the connection is gone, and its calls with it
                self.ended.setdefault(opened, now)
