"""``send_slice`` on its own, over a real loopback socket, plain and TLS: a slice is sent whole,
refused while nothing is sent when the file no longer holds it (the segment was truncated after
the slice was taken), or cut short by closing the connection once the headers are out; never
sent short silently. No descriptor outlives the response, and a worker thread keeps its own."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from http_api import sendfile
from http_api.sendfile import SENDFILE_MIN_BYTES, TLS_CHUNK_BYTES, SendfileGate, send_slice
from logbroker.certs import CA_CERT
from logbroker.errors import NotAvailableError
from segments.log import LogSlice
from segments.segment import Extent
from tests.support.nodes import make_certs

WAIT_S = 20.0
POLL_S = 0.01
LARGE = 3 * TLS_CHUNK_BYTES + 12_345
UNREAD_FILE_BYTES = 24 * TLS_CHUNK_BYTES
# What a client that reads nothing may cost: the kernel's send buffer (tcp_wmem's 4 MiB at most),
# the transports' small buffers and the chunk being written plus the one read before it.
UNREAD_READ_BYTES_MAX = 4 * TLS_CHUNK_BYTES + 2 * TLS_CHUNK_BYTES + TLS_CHUNK_BYTES
STABLE_S = 1.0
STALL_S = 2.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


def _tls_contexts(certs: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(certs / "node-1.pem", certs / "node-1.key")
    return server, ssl.create_default_context(cafile=str(certs / CA_CERT))


def _open_on(path: Path) -> int:
    """This process's descriptors on ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except FileNotFoundError:
            continue
    return count


@pytest.mark.asyncio
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
@pytest.mark.parametrize(("file_bytes", "slice_bytes", "plain", "secure"), [
    pytest.param(100, 100, "whole", "whole", id="small"),
    pytest.param(100, 200, "refused", "refused", id="small-truncated"),
    pytest.param(SENDFILE_MIN_BYTES + 1, SENDFILE_MIN_BYTES + 1, "whole", "whole", id="one-chunk"),
    pytest.param(LARGE, LARGE, "whole", "whole", id="several-chunks"),
    pytest.param(200_000, 300_000, "short", "refused", id="truncated-in-the-first-chunk"),
    pytest.param(LARGE, LARGE + 1, "short", "short", id="truncated-in-the-last-chunk"),
])
async def test_slices_are_sent_whole_refused_or_cut(tmp_path, certs, tls, file_bytes, slice_bytes, plain, secure):
    path = tmp_path / "segment"
    content = os.urandom(file_bytes)
    path.write_bytes(content)
    refusals: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        piece = LogSlice(os.open(path, os.O_RDONLY), Extent(0, slice_bytes, 0, 1))
        try:
            return await send_slice(request, web.StreamResponse(headers={"X-Next": "1"}), piece, gate)
        except NotAvailableError:
            refusals.append("refused")
            return web.Response(status=503)

    app = web.Application()
    app.router.add_get("/", handler)
    server_tls, client_tls = _tls_contexts(certs) if tls else (None, None)
    with ThreadPoolExecutor(max_workers=1) as executor:
        gate = SendfileGate(executor, 1)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(ssl=server_tls)
        try:
            assert server.scheme == ("https" if tls else "http")
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls or False)) as session, \
                    session.get(server.make_url("/")) as response:
                try:
                    body: bytes | None = await response.read()
                except aiohttp.ClientPayloadError:
                    body = None
        finally:
            await server.close()
        async with asyncio.timeout(WAIT_S):  # the thread's slot comes back (once its thread returned)
            await gate.slots.acquire()
    outcome = "refused" if response.status == 503 else "whole" if body == content else "short"
    assert outcome == (secure if tls else plain)
    assert refusals == (["refused"] if outcome == "refused" else [])
    if outcome == "whole":
        assert response.status == 200 and response.headers["X-Next"] == "1"
    assert _open_on(path) == 0, "the slice's descriptor was closed"


@pytest.mark.asyncio
async def test_a_cancelled_caller_leaves_the_thread_its_descriptor_and_slot(tmp_path):
    path, other = tmp_path / "segment", tmp_path / "other"
    path.write_bytes(b"abcdef")
    other.write_bytes(b"zzzzzz")
    release = threading.Event()
    read: list[bytes] = []

    def work(fd: int, size: int, position: int) -> bytes:
        release.wait(WAIT_S)
        read.append(os.pread(fd, size, position))
        return read[-1]

    with ThreadPoolExecutor(max_workers=1) as executor:
        gate = SendfileGate(executor, 1)
        fd = os.open(path, os.O_RDONLY)
        call = asyncio.ensure_future(gate.run(work, (fd,), 3, 1))
        await asyncio.sleep(POLL_S)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        os.close(fd)  # what the handler's ``with piece:`` does on its way out
        reused = os.open(other, os.O_RDONLY)  # may well get the same number
        try:
            assert gate.slots.locked(), "the slot is held while the thread runs"
            release.set()
            async with asyncio.timeout(WAIT_S):
                while gate.slots.locked():
                    await asyncio.sleep(POLL_S)
        finally:
            os.close(reused)
    assert read == [b"bcd"], "the thread read its own descriptor, not a closed or reused one"
    assert _open_on(path) == 0


@pytest.mark.asyncio
async def test_a_client_that_reads_nothing_costs_a_bounded_read_and_is_dropped_over_tls(tmp_path, certs, monkeypatch):
    path = tmp_path / "segment"
    path.write_bytes(os.urandom(UNREAD_FILE_BYTES))
    read_bytes = [0]
    pread_exact = sendfile._pread_exact

    def counting(fd: int, size: int, position: int) -> bytes:
        read_bytes[0] += size
        return pread_exact(fd, size, position)

    monkeypatch.setattr(sendfile, "_pread_exact", counting)
    monkeypatch.setattr(sendfile, "SEND_TIMEOUT_S", STALL_S)

    async def handler(request: web.Request) -> web.StreamResponse:
        piece = LogSlice(os.open(path, os.O_RDONLY), Extent(0, UNREAD_FILE_BYTES, 0, 1))
        return await send_slice(request, web.StreamResponse(), piece, gate)

    app = web.Application()
    app.router.add_get("/", handler)
    server_tls, client_tls = _tls_contexts(certs)
    with ThreadPoolExecutor(max_workers=1) as executor:
        gate = SendfileGate(executor, 1)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(ssl=server_tls)
        try:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: no autotuning
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
            _, writer = await asyncio.open_connection(sock=sock, ssl=client_tls, server_hostname="127.0.0.1")
            try:
                writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                async with asyncio.timeout(WAIT_S):  # wait until the node stops reading the file
                    seen, since = -1, time.monotonic()
                    while read_bytes[0] == 0 or read_bytes[0] != seen or time.monotonic() - since < STABLE_S:
                        if read_bytes[0] != seen:
                            seen, since = read_bytes[0], time.monotonic()
                        await asyncio.sleep(POLL_S)
                    while _open_on(path):  # the node gives up on the client
                        await asyncio.sleep(POLL_S)
            finally:
                writer.close()
        finally:
            await server.close()
    assert 0 < read_bytes[0] <= UNREAD_READ_BYTES_MAX, f"read {read_bytes[0]} bytes for a client that read nothing"
    assert _open_on(path) == 0
