"""The RPC client: one connection to one node (made again after it is lost), mutual TLS, the
cluster token in the connection's hello, a deadline on every call, TCP keepalive.

How a call ends says what the other node may have done (``Status``): ``UNAVAILABLE`` — never
sent (no connection, refused); ``UNKNOWN`` — sent, and the connection was lost before its
answer; ``DEADLINE_EXCEEDED`` — sent (or being sent) and not answered in time. Connecting is
shared by the calls that wait for it and bounded by ``CONNECT_TIMEOUT_S``; at most
``PENDING_MAX`` calls wait for answers on one connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import ssl
import time
from typing import Any, Final

from internal_rpc.errors import ERROR_EXTRA_BYTES_MAX, RpcCallError, Status
from internal_rpc.frames import HEADER, FrameError, body_length, unpack
from internal_rpc.security import TlsFiles
from internal_rpc.server import keep_alive, read_frame, write_frame

DEADLINE_S: Final = 10.0
CONNECT_TIMEOUT_S: Final = 5.0
CLOSE_TIMEOUT_S: Final = 1.0
PENDING_MAX: Final = 10_000
SILENT_CLOSE_S: Final = 1.0  # a cancelled call that heard nothing this long closes its connection
STATUS_BY_RETRIABLE: Final = {True: Status.UNAVAILABLE, False: Status.FAILED_PRECONDITION}
UNANSWERED: Final = {"unauthenticated": Status.UNAUTHENTICATED, "unimplemented": Status.UNIMPLEMENTED,
                     "deadline_exceeded": Status.DEADLINE_EXCEEDED}


def _extra(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str) or len(raw) > ERROR_EXTRA_BYTES_MAX:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _error(answer: dict[str, Any]) -> RpcCallError:
    code, detail = str(answer.get("e")), str(answer.get("d", ""))
    if not answer.get("a"):
        return RpcCallError(UNANSWERED.get(code, Status.INTERNAL), code, detail)
    return RpcCallError(STATUS_BY_RETRIABLE[bool(answer.get("r"))], code, detail, _extra(answer.get("x")),
                        answered=True)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Marks a failed connect as seen even when every call that waited for it has given up."""
    if not task.cancelled():
        task.exception()


class _Connection:
    """An open connection: a reader task hands each answer to the call waiting for it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self.writer = writer
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.lost: str | None = None
        # When a frame's header or body last arrived (not the loop's clock: uvloop's is in whole ms).
        self.heard_at = time.monotonic()
        self._mid_frame = False
        self._task = asyncio.create_task(self._read())

    def silent_since(self, at: float) -> bool:
        """Nothing has arrived on this connection since ``at`` (``time.monotonic``), and no frame
        is arriving now (a large answer in transit is not a silence)."""
        return self.heard_at < at and not self._mid_frame

    async def _read(self) -> None:
        reason = "the other node closed the connection"
        try:
            while True:
                header = await self._reader.readexactly(HEADER.size)
                self.heard_at = time.monotonic()
                self._mid_frame = True  # bytes are arriving: the connection is not silent
                answer = unpack(await self._reader.readexactly(body_length(header)))
                self._mid_frame = False
                self.heard_at = time.monotonic()
                call_id = answer.get("i")
                waiter = self.pending.pop(call_id, None) if isinstance(call_id, int) else None
                if waiter is not None and not waiter.done():
                    waiter.set_result(answer)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, FrameError) as exc:
            reason = f"connection lost: {exc!r}"
        finally:
            self.close(reason)

    def close(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
            self.writer.close()
            if self._task is not asyncio.current_task():
                self._task.cancel()
        pending, self.pending = self.pending, {}
        for waiter in pending.values():
            if not waiter.done():
                waiter.set_exception(RpcCallError(Status.UNKNOWN, "connection_lost", reason))


class RpcClient:
    def __init__(self, address: str, *, tls: TlsFiles | None, cluster_token: str | None,
                 deadline_s: float = DEADLINE_S, server_name: str | None = None, node_id: int | None = None) -> None:
        """``node_id``: the calling node's id, named in the hello (the other node then knows whose
        connection it is when it ends; a hint only, never evidence of anything)."""
        host, _, port = address.rpartition(":")
        self._host, self._port = host.strip("[]"), int(port)
        self._ssl: ssl.SSLContext | None = tls.client_context() if tls is not None else None
        self._server_name = server_name or self._host
        self._token = cluster_token
        self._node_id = node_id
        self._deadline_s = deadline_s
        self.address = address
        self._connection: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None
        self._ids = itertools.count(1)
        self._closed = False

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(
                    self._host, self._port, ssl=self._ssl, server_hostname=self._server_name if self._ssl else None)
                keep_alive(writer)
                try:
                    hello_frame: dict[str, Any] = {"hello": 1, "token": self._token}
                    if self._node_id is not None:
                        hello_frame["node"] = self._node_id
                    write_frame(writer, hello_frame)
                    await writer.drain()
                    hello = await read_frame(reader)
                except BaseException:
                    writer.close()
                    raise
        except TimeoutError:
            raise RpcCallError(Status.UNAVAILABLE, "unavailable",
                               f"no connection to {self.address} within {CONNECT_TIMEOUT_S:g} s") from None
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, FrameError) as exc:
            raise RpcCallError(Status.UNAVAILABLE, "unavailable", f"no connection to {self.address}: {exc!r}") from exc
        if hello.get("hello") != 1:
            writer.close()
            raise _error({**hello, "a": False})
        return _Connection(reader, writer)

    async def _open(self) -> _Connection:
        connection = self._connection
        if connection is not None and connection.lost is None:
            return connection
        if self._closed:
            raise RpcCallError(Status.CANCELLED, "cancelled", "the client is closed")
        held = self._connecting
        if held is not None and held.done():
            # Finished while no call waited for it: its connection if still open, else connect anew.
            self._connecting = None
            if not held.cancelled() and held.exception() is None and held.result().lost is None:
                self._connection = held.result()
                return held.result()
        connecting = self._connecting
        if connecting is None:
            connecting = self._connecting = asyncio.create_task(self._connect())
            connecting.add_done_callback(_retrieve)
        try:
            connection = await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None
        self._connection = connection
        return connection

    async def call(self, service: str, method: str, request: Any, *,
                   deadline_s: float | None = None, stream: int | None = None) -> dict[str, Any]:
        """One call, bounded by ``deadline_s`` (default: the client's). ``request``: a map or a
        typed message (``internal_rpc.messages``); the answer comes back as the map it was sent
        as, for the caller to decode (``messages.decode``)."""
        timeout = self._deadline_s if deadline_s is None else deadline_s
        connection: _Connection | None = None
        call_id = next(self._ids)
        sent = False
        sent_at = 0.0
        try:
            async with asyncio.timeout(timeout):
                connection = await self._open()
                if len(connection.pending) >= PENDING_MAX:
                    raise RpcCallError(Status.RESOURCE_EXHAUSTED, "resource_exhausted",
                                       f"{PENDING_MAX} calls already wait on {self.address}")
                message: dict[str, Any] = {"i": call_id, "m": f"{service}/{method}", "t": int(timeout * 1000),
                                           "b": request}
                if stream is not None:
                    message["s"] = stream
                waiter = asyncio.get_running_loop().create_future()
                try:
                    write_frame(connection.writer, message)
                except FrameError as exc:
                    raise RpcCallError(Status.RESOURCE_EXHAUSTED, "message_too_large", str(exc)) from exc
                sent, sent_at = True, time.monotonic()
                connection.pending[call_id] = waiter
                await connection.writer.drain()
                answer = await waiter
        except TimeoutError:
            status = Status.DEADLINE_EXCEEDED if sent else Status.UNAVAILABLE
            if sent and connection is not None:
                self._give_up_if_silent(connection, call_id, sent_at, SILENT_CLOSE_S)
            raise RpcCallError(status, status.value, f"no answer from {self.address} within {timeout:g} s") from None
        except asyncio.CancelledError:
            if sent and connection is not None:
                self._give_up_if_silent(connection, call_id, sent_at, SILENT_CLOSE_S)
            raise
        except (ConnectionError, OSError) as exc:
            if connection is not None:
                # This call's own waiter is not awaited any more: taken out before the close fails
                # the others, so its error is not left unretrieved.
                connection.pending.pop(call_id, None)
                connection.close(f"connection lost: {exc!r}")
            raise RpcCallError(Status.UNKNOWN, "connection_lost",
                               f"connection to {self.address} lost: {exc!r}") from exc
        finally:
            if connection is not None:
                connection.pending.pop(call_id, None)
        if "e" in answer:
            raise _error(answer)
        body = answer.get("b")
        if not isinstance(body, dict):
            raise RpcCallError(Status.INTERNAL, "internal", f"{self.address} answered without a map")
        return body

    def _give_up_if_silent(self, connection: _Connection, call_id: int, sent_at: float, waited_s: float) -> None:
        """Close ``connection`` when nothing at all has arrived on it since this call was sent
        and the call waited at least ``waited_s`` (a short deadline that lapses is no evidence:
        the connection's other calls, a forwarded long-poll, may rightly be quiet for longer): the
        network or the other node has gone quiet
        (a cut, a pause). Frames sent on it now would queue behind data the kernel is still
        retransmitting with a growing backoff; the next call connects anew instead, which gets
        through as soon as the network does."""
        if connection.silent_since(sent_at) and time.monotonic() - sent_at >= waited_s:
            connection.pending.pop(call_id, None)  # this call's own waiter: not failed by the close
            connection.close(f"nothing heard from {self.address} since a call was sent")

    def cancel_stream(self, stream: int) -> None:
        """Tell the other node that what ``stream`` has in flight is given up (best effort)."""
        connection = self._connection
        if connection is not None and connection.lost is None:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                write_frame(connection.writer, {"k": stream})

    def stream(self, service: str, method: str) -> RpcStream:
        """A sequence of ``method`` calls handled in order, one after another, on the other node."""
        return RpcStream(self, service, method, next(self._ids))

    async def close(self) -> None:
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(BaseException):
                await self._connecting
        if self._connection is not None:
            self._connection.close("the client is closed")
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await self._connection.writer.wait_closed()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RpcStream:
    """One call at a time, handled in order on the other node. A call that fails on the way
    (deadline, lost connection, refused) closes the stream for good and cancels what it has in
    flight there; a handler's error is an answered one and the stream goes on."""

    def __init__(self, client: RpcClient, service: str, method: str, stream_id: int) -> None:
        self._client = client
        self._service = service
        self._method = method
        self._id = stream_id
        self.closed = False

    async def call(self, request: Any, *, deadline_s: float) -> dict[str, Any]:
        if self.closed:
            raise RpcCallError(Status.UNAVAILABLE, "stream_closed", "the stream is closed")
        try:
            return await self._client.call(self._service, self._method, request, deadline_s=deadline_s,
                                           stream=self._id)
        except RpcCallError as exc:
            if not exc.answered:
                self.close()
            raise

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._client.cancel_stream(self._id)
