"""The RPC server: services of methods on msgpack maps (``internal_rpc.frames``), behind mutual
TLS and the cluster token. A method is ``async (request: dict) -> answer`` (a map, or a typed
message: ``internal_rpc.messages.bind`` decodes the request into its type first); an exception with a
``code`` attribute (the broker's typed errors) is answered as that code, anything else as
``internal``. ``RpcServer`` is an async context manager; ``close`` is idempotent and bounded.

Per connection: the hello (the cluster token) comes first, within ``HELLO_TIMEOUT_S``; then each
call runs in a task of its own, at most ``IN_FLIGHT_MAX`` at a time (the connection is not read
further meanwhile, so a flooding peer is held back by TCP), under the deadline its caller sent.
Calls of one stream run one after another. A lost connection cancels its calls in flight, as a
caller that gave up on a stream cancels that stream's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from internal_rpc.errors import ERROR_EXTRA_BYTES_MAX
from internal_rpc.frames import HEADER, FrameError, body_length, encode, unpack
from internal_rpc.security import TlsFiles, token_matches

log = logging.getLogger(__name__)
Method = Callable[[Any], Awaitable[Any]]
STOP_GRACE_S: Final = 5.0
HELLO_TIMEOUT_S: Final = 10.0
IN_FLIGHT_MAX: Final = 1024  # calls running per connection
DEADLINE_MAX_S: Final = 600.0
KEEPALIVE: Final = ((socket.TCP_KEEPIDLE, 10), (socket.TCP_KEEPINTVL, 5), (socket.TCP_KEEPCNT, 2))


def keep_alive(writer: asyncio.StreamWriter) -> None:
    """TCP keepalive, so a connection to a peer that vanished is noticed within ~20 s idle."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in KEEPALIVE:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def error_extra(exc: Exception) -> str:
    """The JSON details of a handler's error (its ``extra`` and an offset range's bounds), as far
    as they are plain values and fit ``ERROR_EXTRA_BYTES_MAX``."""
    extra = {k: v for k, v in (getattr(exc, "extra", None) or {}).items()
             if isinstance(v, (str, int, float, bool, type(None)))}
    for name in ("earliest", "latest"):
        value = getattr(exc, name, None)
        if isinstance(value, int):
            extra[name] = value
    text = json.dumps(extra)
    return text if len(text) <= ERROR_EXTRA_BYTES_MAX else "{}"


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    header = await reader.readexactly(HEADER.size)
    return unpack(await reader.readexactly(body_length(header)))


def write_frame(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.writelines(encode(message))


def _stream_id(message: dict[str, Any]) -> int | None:
    stream = message.get("s")
    return stream if isinstance(stream, int) and not isinstance(stream, bool) else None


class _Connection:
    """One client's connection: its calls in flight and its streams' order."""

    def __init__(self, server: RpcServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._server = server
        self._reader = reader
        self._writer = writer
        self._slots = asyncio.Semaphore(IN_FLIGHT_MAX)
        self._tasks: set[asyncio.Task[None]] = set()
        self._streams: dict[int, tuple[asyncio.Lock, set[asyncio.Task[None]]]] = {}
        self.peer: int | None = None  # the node id the caller named in its hello

    async def serve(self) -> None:
        try:
            if not await self._hello():
                return
            while True:
                message = await read_frame(self._reader)
                if "k" in message:
                    self._cancel_stream(message["k"])
                    continue
                await self._slots.acquire()
                task = asyncio.create_task(self._call(message))
                self._tasks.add(task)
                task.add_done_callback(self._done)
                stream = _stream_id(message)
                if stream is not None:
                    self._streams.setdefault(stream, (asyncio.Lock(), set()))[1].add(task)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, OSError):
            pass
        except FrameError as exc:
            log.warning("internal RPC: a malformed frame ends the connection", extra={"fields": {"error": str(exc)}})
        finally:
            for task in list(self._tasks):
                task.cancel()
            self._writer.close()

    async def _hello(self) -> bool:
        async with asyncio.timeout(HELLO_TIMEOUT_S):
            hello = await read_frame(self._reader)
        token = self._server.cluster_token
        if hello.get("hello") != 1 or (token is not None and not token_matches(token, hello.get("token"))):
            write_frame(self._writer, {"e": "unauthenticated", "d": "missing or wrong cluster token"})
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.drain()
            return False
        peer = hello.get("node")
        if isinstance(peer, int) and not isinstance(peer, bool):
            self.peer = peer
        write_frame(self._writer, {"hello": 1})
        return True

    def abort(self) -> None:
        self._writer.transport.abort()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    def _cancel_stream(self, stream: object) -> None:
        held = self._streams.pop(stream, None) if isinstance(stream, int) and not isinstance(stream, bool) else None
        if held is not None:
            for task in held[1]:
                task.cancel()

    async def _call(self, message: dict[str, Any]) -> None:
        call_id, name, stream = message.get("i"), message.get("m"), _stream_id(message)
        deadline_ms = message.get("t")
        timeout = min(deadline_ms / 1000, DEADLINE_MAX_S) if isinstance(deadline_ms, (int, float)) else DEADLINE_MAX_S
        held = self._streams.get(stream) if stream is not None else None
        task = asyncio.current_task()
        try:
            if held is None:
                answer = await self._run(name, message.get("b"), timeout)
            else:
                async with held[0]:
                    answer = await self._run(name, message.get("b"), timeout)
        except TimeoutError:
            answer = {"e": "deadline_exceeded", "d": "the call ran past its deadline", "a": False}
        finally:
            if held is not None and stream is not None:
                if task is not None:
                    held[1].discard(task)
                if not held[1] and self._streams.get(stream) is held:
                    del self._streams[stream]
        answer["i"] = call_id
        try:
            write_frame(self._writer, answer)
        except FrameError as exc:
            log.error("internal RPC %s: an answer over the size limit", name, extra={"fields": {"error": str(exc)}})
            write_frame(self._writer, {"i": call_id, "e": "internal", "d": "the answer is too large", "a": True})
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def _run(self, name: object, request: object, timeout: float) -> dict[str, Any]:
        method = self._server.methods.get(name) if isinstance(name, str) else None
        if method is None:
            return {"e": "unimplemented", "d": f"no method {name!r}", "a": False}
        if not isinstance(request, dict):
            return {"e": "invalid_request", "d": "a request must be a map", "a": True}
        try:
            async with asyncio.timeout(timeout):
                return {"b": await method(request)}
        except TimeoutError:
            raise
        except Exception as exc:
            code = getattr(exc, "code", None)
            if not isinstance(code, str):
                log.exception("internal RPC %s failed", name)
                return {"e": "internal", "d": "internal error", "a": True}
            return {"e": code, "d": str(exc), "r": bool(getattr(exc, "retriable", False)),
                    "x": error_extra(exc), "a": True}


class RpcServer:
    def __init__(self, host: str, port: int, services: Mapping[str, Mapping[str, Method]], *,
                 tls: TlsFiles | None, cluster_token: str | None,
                 on_peer_gone: Callable[[int], None] | None = None) -> None:
        """``tls`` None serves plaintext (development only); ``cluster_token`` None checks none.
        ``on_peer_gone``: called with the node id a caller named in its hello when its
        connection ends while this server runs (the caller may have crashed: its kernel closed
        the connection)."""
        self._host = host
        self._port = port
        self._tls = tls
        self.cluster_token = cluster_token
        self._on_peer_gone = on_peer_gone
        self.methods: dict[str, Method] = {f"{service}/{name}": method for service, methods in services.items()
                                           for name, method in methods.items()}
        self._server: asyncio.Server | None = None
        self._connections: dict[_Connection, asyncio.Task[None]] = {}
        self.port = 0
        self._closed = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        keep_alive(writer)
        task = asyncio.current_task()
        assert task is not None
        connection = _Connection(self, reader, writer)
        self._connections[connection] = task
        try:
            await connection.serve()
        finally:
            self._connections.pop(connection, None)
            if connection.peer is not None and self._on_peer_gone is not None and not self._closed:
                try:
                    self._on_peer_gone(connection.peer)
                except Exception:
                    log.exception("internal RPC: the peer-gone callback failed")

    async def start(self) -> int:
        context = self._tls.server_context() if self._tls is not None else None
        self._server = await asyncio.start_server(self._accept, self._host, self._port, ssl=context,
                                                  ssl_handshake_timeout=HELLO_TIMEOUT_S if context else None)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        if self._closed or self._server is None:
            self._closed = True
            return
        self._closed = True
        self._server.close()
        for connection in list(self._connections):
            connection.abort()  # its serve() ends on the closed transport and cancels its calls
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_GRACE_S):
                await asyncio.gather(*self._connections.values(), return_exceptions=True)
                await self._server.wait_closed()

    async def __aenter__(self) -> RpcServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
