"""Zero-copy responses: ``os.sendfile`` from a segment file straight to the client's socket.

uvloop does not implement ``loop.sendfile`` (aiohttp would fall back to reading into Python and
writing), so large slices go through ``os.sendfile`` on the raw socket in a worker thread, after
the response headers have left the transport's buffer. Small slices (below
``SENDFILE_MIN_BYTES``) are read and written normally: the thread hop costs more than the copy.
Threads are bounded by a semaphore; when all are busy the copying path is used instead, so a slow
client can hold at most one thread, and only until ``SEND_TIMEOUT_S`` passes without progress.
"""

from __future__ import annotations

import asyncio
import os
import select
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from aiohttp import web

from logbroker.errors import NotAvailableError
from segments.log import LogSlice

SENDFILE_MIN_BYTES: Final = 64 * 1024
SEND_TIMEOUT_S: Final = 30.0
HEADER_FLUSH_TIMEOUT_S: Final = 5.0
HEADER_FLUSH_POLL_S: Final = 0.001


class SendfileGate:
    """The threads that may block in ``os.sendfile`` (a bound, not a queue)."""

    def __init__(self, executor: ThreadPoolExecutor, threads: int) -> None:
        self.executor = executor
        self.slots = asyncio.Semaphore(threads)


async def send_slice(request: web.Request, response: web.StreamResponse, piece: LogSlice,
                     gate: SendfileGate) -> web.StreamResponse:
    """Send ``piece`` as the body of ``response`` (closes the slice). Once the headers are out,
    a failure can only be reported by closing the connection (the client sees a short body)."""
    with piece:
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if piece.size_bytes < SENDFILE_MIN_BYTES or sock is None or gate.slots.locked():
            # A complete Response goes out as one write, headers and body together (a prepared
            # StreamResponse sends its headers alone, and the client would wake twice).
            body = piece.read()
            if len(body) != piece.size_bytes:  # the segment was truncated after the slice was taken
                raise NotAvailableError("the partition changed while it was read; fetch again")
            return web.Response(body=body, status=response.status, headers=response.headers)
        response.content_length = piece.size_bytes
        await response.prepare(request)
        try:
            async with gate.slots:
                await _wait_headers_sent(transport)
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(gate.executor, _sendfile_all, sock.fileno(), piece.fd,
                                           piece.position, piece.size_bytes)
            await response.write_eof()
        except (OSError, TimeoutError):
            if transport is not None:
                transport.close()
    return response


async def _wait_headers_sent(transport: Any) -> None:
    deadline = time.monotonic() + HEADER_FLUSH_TIMEOUT_S
    while transport.get_write_buffer_size() > 0:
        if time.monotonic() > deadline or transport.is_closing():
            raise ConnectionResetError("response headers could not be sent")
        await asyncio.sleep(HEADER_FLUSH_POLL_S)


def _sendfile_all(sock_fd: int, file_fd: int, position: int, count: int) -> None:
    """Blocking loop in a worker thread; the socket stays non-blocking, so wait with poll."""
    poller = select.poll()
    poller.register(sock_fd, select.POLLOUT)
    while count > 0:
        try:
            sent = os.sendfile(sock_fd, file_fd, position, count)
        except BlockingIOError:
            if not poller.poll(SEND_TIMEOUT_S * 1000):
                raise TimeoutError(f"client did not read for {SEND_TIMEOUT_S} s") from None
            continue
        if sent == 0:
            raise ConnectionResetError("client closed the connection")
        position += sent
        count -= sent
