"""Raw batch responses: a log slice as a fetch's body, zero-copy where the connection allows it.

Plain HTTP: uvloop does not implement ``loop.sendfile`` (aiohttp would fall back to reading into
Python and writing), so large slices go through ``os.sendfile`` on the raw socket in a worker
thread, after the response headers have left the transport's buffer.

HTTPS (decision 0150): the raw socket carries TLS records, so every byte must go through the TLS
transport. Large slices are read with ``os.pread`` in a worker thread, at most ``TLS_CHUNK_BYTES``
at a time, and written through the response, whose ``write`` waits for the transport to drain
before the next read: a connection holds about two chunks, however slowly its client reads, and
is closed when its buffer does not shrink for ``SEND_TIMEOUT_S``. A slice of one chunk goes out
as one complete response.

Small slices (below ``SENDFILE_MIN_BYTES``) are read and written normally on both: the thread hop
costs more than the copy. Threads are bounded by a semaphore; when all are busy the copying path
is used instead, on the event loop, so a slow client can hold at most one thread, and only until
``SEND_TIMEOUT_S`` passes without progress. A thread works on its own duplicates of the
descriptors and frees its slot only when it returns, so a handler cancelled meanwhile may close
the slice (and the transport its socket) without the thread touching a closed or reused number.

A slice the file no longer holds whole (the segment was truncated after the slice was taken) is
refused with ``NotAvailableError`` while nothing is sent; once the headers are out, only closing
the connection can report it (the client sees a short body).
"""

from __future__ import annotations

import asyncio
import functools
import os
import select
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

from aiohttp import web

from logbroker.errors import NotAvailableError
from segments.log import LogSlice

SENDFILE_MIN_BYTES: Final = 64 * 1024
TLS_CHUNK_BYTES: Final = 1024 * 1024
SEND_TIMEOUT_S: Final = 30.0
HEADER_FLUSH_TIMEOUT_S: Final = 5.0
HEADER_FLUSH_POLL_S: Final = 0.001

_T = TypeVar("_T")


class SendfileGate:
    """The threads that may block in ``os.sendfile`` or ``os.pread`` (a bound, not a queue)."""

    def __init__(self, executor: ThreadPoolExecutor, threads: int) -> None:
        self.executor = executor
        self.slots = asyncio.Semaphore(threads)

    async def run(self, work: Callable[..., _T], fds: Sequence[int], *args: int) -> _T:
        """``work(*own_fds, *args)`` in a thread, ``own_fds`` being duplicates of ``fds`` that the
        thread closes. The slot is freed when the thread returns, even if the caller was cancelled."""
        await self.slots.acquire()
        own: list[int] = []
        try:
            own.extend(os.dup(fd) for fd in fds)
            future = asyncio.get_running_loop().run_in_executor(self.executor, _owning, work, own, *args)
        except BaseException:
            _close_all(own)
            self.slots.release()
            raise
        future.add_done_callback(functools.partial(self._done, own))
        return await asyncio.shield(future)

    def _done(self, own: list[int], future: asyncio.Future[Any]) -> None:
        self.slots.release()
        if future.cancelled():  # never started, so the descriptors are still ours
            _close_all(own)
        else:
            future.exception()  # seen, even when the cancelled caller will not look


def _owning(work: Callable[..., _T], fds: list[int], *args: int) -> _T:
    try:
        return work(*fds, *args)
    finally:
        _close_all(fds)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


async def send_slice(request: web.Request, response: web.StreamResponse, piece: LogSlice,
                     gate: SendfileGate) -> web.StreamResponse:
    """Send ``piece`` as the body of ``response`` (closes the slice). Once the headers are out,
    a failure can only be reported by closing the connection (the client sees a short body)."""
    with piece:
        transport = request.transport
        if transport is not None and transport.get_extra_info("sslcontext") is not None:
            return await _send_through_tls(request, transport, response, piece, gate)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if piece.size_bytes < SENDFILE_MIN_BYTES or sock is None or gate.slots.locked():
            # A complete Response goes out as one write, headers and body together (a prepared
            # StreamResponse sends its headers alone, and the client would wake twice).
            return _complete(response, _pread_exact(piece.fd, piece.size_bytes, piece.position))
        response.content_length = piece.size_bytes
        await response.prepare(request)
        try:
            await _wait_headers_sent(transport)
            await gate.run(_sendfile_all, (piece.fd, sock.fileno()), piece.position, piece.size_bytes)
            await response.write_eof()
        except (OSError, TimeoutError):
            if transport is not None:
                transport.close()
    return response


async def _send_through_tls(request: web.Request, transport: Any, response: web.StreamResponse, piece: LogSlice,
                            gate: SendfileGate) -> web.StreamResponse:
    """Copy ``piece`` through the TLS transport a chunk at a time (the first read happens before
    the headers, so a slice truncated by then is still refused cleanly)."""
    position, end = piece.position, piece.position + piece.size_bytes
    chunk = await _read_chunk(gate, piece.fd, min(TLS_CHUNK_BYTES, piece.size_bytes), position)
    if len(chunk) == piece.size_bytes:
        return _complete(response, chunk)
    response.content_length = piece.size_bytes
    await response.prepare(request)
    try:
        while True:
            await _write_draining(response, transport, chunk)
            position += len(chunk)
            if position == end:
                break
            chunk = await _read_chunk(gate, piece.fd, min(TLS_CHUNK_BYTES, end - position), position)
        await response.write_eof()
    except (OSError, TimeoutError, NotAvailableError):
        transport.close()
    return response


async def _write_draining(response: web.StreamResponse, transport: Any, chunk: bytes) -> None:
    """``response.write`` (which waits for the transport to drain), failing with ``TimeoutError``
    when the transport's buffer has not shrunk for ``SEND_TIMEOUT_S``."""
    buffered = transport.get_write_buffer_size() + len(chunk)  # at most, once written (before encryption)
    write = asyncio.ensure_future(response.write(chunk))
    try:
        while not (await asyncio.wait([write], timeout=SEND_TIMEOUT_S))[0]:
            now = transport.get_write_buffer_size()
            if now >= buffered:
                raise TimeoutError(f"client did not read for {SEND_TIMEOUT_S} s")
            buffered = now
        write.result()
    finally:
        write.cancel()


async def _read_chunk(gate: SendfileGate, fd: int, size: int, position: int) -> bytes:
    """A large read in a gate thread while one is free; small ones on the loop."""
    if size >= SENDFILE_MIN_BYTES and not gate.slots.locked():
        return await gate.run(_pread_exact, (fd,), size, position)
    return _pread_exact(fd, size, position)


def _pread_exact(fd: int, size: int, position: int) -> bytes:
    """A short read means the segment was truncated after the slice was taken."""
    data = os.pread(fd, size, position)
    if len(data) != size:
        raise NotAvailableError("the partition changed while it was read; fetch again")
    return data


def _complete(response: web.StreamResponse, body: bytes) -> web.Response:
    return web.Response(body=body, status=response.status, headers=response.headers)


async def _wait_headers_sent(transport: Any) -> None:
    deadline = time.monotonic() + HEADER_FLUSH_TIMEOUT_S
    while transport.get_write_buffer_size() > 0:
        if time.monotonic() > deadline or transport.is_closing():
            raise ConnectionResetError("response headers could not be sent")
        await asyncio.sleep(HEADER_FLUSH_POLL_S)


def _sendfile_all(file_fd: int, sock_fd: int, position: int, count: int) -> None:
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
