"""The HTTP listener: every accepted connection passes through ``ConnectionGuard`` before aiohttp.

aiohttp (3.14) bounds neither the time to send a request head nor the number of connections.
The guard is the protocol factory given to ``loop.create_server`` (by ``GuardedSite``): each
connection gets a ``_Guarded`` protocol that counts it, refuses it over the bound, and otherwise
hands every callback to the aiohttp protocol made by the runner's ``web.Server`` while a
``HeadClock`` (``http_api.connections``) watches it. What the clock needs from aiohttp comes
through the server's public ``request_factory`` (a complete head became a request, with its body
stream) and ``request_handler`` (the request's handler returned) attributes, wrapped once before
the listener starts; a connection past its head deadline is closed with the handler's public
``force_close()``. Works the same under TLS (the guard sits inside the TLS protocol), where the
handshake itself is bounded by ``header_timeout_ms`` too.

A refused connection is answered with the 503 problem and half-closed, then read and discarded
until the peer closes or ``REFUSED_LINGER_S`` passes: closing a socket with unread bytes would
reset it and the peer could lose the answer. At most ``REFUSED_LINGERING_MAX`` linger at once;
beyond, they are closed at once.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Final, cast

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from http_api.connections import ConnectionCount, HeadClock, connections_cap, refusal
from logbroker.config import NodeConfig

REFUSED_LINGER_S: Final = 2.0
REFUSED_LINGERING_MAX: Final = 256

RequestFactory = Callable[[RawRequestMessage, StreamReader, RequestHandler, AbstractStreamWriter,
                           "asyncio.Task[None]"], web.BaseRequest]


def descriptor_limit() -> int | None:
    """The process's soft limit on open files (``None``: unlimited), read when the listener starts."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


class ConnectionGuard:
    """Protocol factory and bookkeeping of every connection the listener accepts."""

    def __init__(self, server: web.Server, *, connections_max: int, header_timeout_s: float) -> None:
        assert header_timeout_s > 0, header_timeout_s
        self.server = server
        self.count = ConnectionCount(connections_max)
        self.header_timeout_s = header_timeout_s
        self.refusal = refusal(connections_max)
        self._by_handler: dict[RequestHandler, _Guarded] = {}
        self._lingering: set[asyncio.Transport] = set()
        self._hook(server)

    def _hook(self, server: web.Server) -> None:
        """Wrap the server's request factory and handler; aiohttp's protocols copy both when they
        are made, so this must happen before the first connection."""
        make_request: RequestFactory = server.request_factory
        handle = server.request_handler

        def began(message: RawRequestMessage, payload: StreamReader, protocol: RequestHandler,
                  writer: AbstractStreamWriter, task: asyncio.Task[None]) -> web.BaseRequest:
            request = make_request(message, payload, protocol, writer, task)
            guarded = self._by_handler.get(protocol)
            if guarded is not None:
                guarded.began(payload)
            return request

        async def handled(request: web.BaseRequest) -> web.StreamResponse:
            try:
                return await handle(request)
            finally:
                guarded = self._by_handler.get(request.protocol)
                if guarded is not None:
                    guarded.ended()

        server.request_factory = began
        server.request_handler = handled

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self)

    def admitted(self, handler: RequestHandler, guarded: _Guarded) -> None:
        self._by_handler[handler] = guarded

    def lost(self, handler: RequestHandler) -> None:
        del self._by_handler[handler]
        self.count.release()

    def refuse(self, transport: asyncio.Transport) -> None:
        transport.write(self.refusal)
        if len(self._lingering) >= REFUSED_LINGERING_MAX:
            transport.close()
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._lingering.add(transport)
        asyncio.get_running_loop().call_later(REFUSED_LINGER_S, transport.close)

    def refused_gone(self, transport: asyncio.Transport) -> None:
        self._lingering.discard(transport)

    def close(self) -> None:
        """Close the refused connections still lingering (the admitted ones are aiohttp's)."""
        for transport in list(self._lingering):
            transport.close()


class _Guarded(asyncio.Protocol):
    """One accepted connection: aiohttp's protocol behind a head clock, or a refusal."""

    __slots__ = ("_clock", "_guard", "_inner", "_loop", "_timer", "_transport")

    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard
        self._loop = asyncio.get_running_loop()
        self._inner: RequestHandler | None = None
        self._transport: asyncio.Transport | None = None
        # Made at accept: under TLS the handshake counts towards the first head's deadline.
        self._clock = HeadClock(guard.header_timeout_s, self._loop.time())
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = real = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        if not self._guard.count.admit():
            self._guard.refuse(real)
            return
        inner = self._guard.server()
        assert not isinstance(inner, asyncio.BufferedProtocol), "aiohttp's protocol changed; see listener.py"
        self._inner = inner
        self._guard.admitted(inner, self)
        inner.connection_made(real)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            return  # a refused connection: its request is not read
        if self._clock.received(self._loop.time()):
            self._arm()
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self._inner is not None:
            self._inner.eof_received()
        return None  # close the transport, as aiohttp's protocol does

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        inner, self._inner = self._inner, None
        if inner is None:
            if self._transport is not None:
                self._guard.refused_gone(self._transport)
            return
        self._guard.lost(inner)
        inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    # ---- the head clock -------------------------------------------------------------------------

    def began(self, payload: StreamReader) -> None:
        self._clock.began(body_pending=not payload.is_eof())
        self._disarm()
        if self._clock.in_body:
            payload.on_eof(self._clock.body_done)

    def ended(self) -> None:
        if self._clock.ended(self._loop.time()):
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        deadline = self._clock.deadline()
        if deadline is not None:
            self._timer = self._loop.call_at(deadline, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self._inner is None:
            return
        if not self._clock.expired(self._loop.time()):
            self._arm()
            return
        self._guard.count.header_timeouts += 1
        self._inner.force_close()


class GuardedSite(web.BaseSite):
    """A TCP listener (optionally TLS) on ``config.http_host``/``http_port`` whose connections go
    through a ``ConnectionGuard`` sized from ``config`` (and the descriptor limit at this moment)."""

    __slots__ = ("_host", "_port", "_sock", "guard")

    def __init__(self, runner: web.BaseRunner, config: NodeConfig, *, ssl_context: ssl.SSLContext | None,
                 sock: socket.socket | None = None) -> None:
        """``sock``: a socket bound already (so the port is known before the node starts)."""
        super().__init__(runner, ssl_context=ssl_context)
        self._sock = sock
        assert runner.server is not None, "runner.setup() first"
        self.guard = ConnectionGuard(runner.server,
                                     connections_max=connections_cap(config.connections_max, descriptor_limit()),
                                     header_timeout_s=config.header_timeout_ms / 1000)
        self._host = config.http_host
        self._port = config.http_port

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        handshake = self.guard.header_timeout_s if self._ssl_context else None
        if self._sock is not None:
            self._server = await loop.create_server(self.guard, sock=self._sock, ssl=self._ssl_context,
                                                    backlog=self._backlog, ssl_handshake_timeout=handshake)
            return
        self._server = await loop.create_server(
            self.guard, self._host, self._port, ssl=self._ssl_context, backlog=self._backlog,
            reuse_address=True, ssl_handshake_timeout=handshake)

    async def stop(self) -> None:
        await super().stop()
        self.guard.close()


class ConnectionCollector(Collector):
    """The guard's figures at scrape time."""

    def __init__(self, count: ConnectionCount) -> None:
        self._count = count

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily("logbroker_http_connections_open", "HTTP connections open", value=self._count.open)
        yield GaugeMetricFamily("logbroker_http_connections_max", "Bound on open HTTP connections",
                                value=self._count.limit)
        yield CounterMetricFamily("logbroker_http_connections_refused",
                                  "HTTP connections refused (503) at the bound", value=self._count.refused)
        yield CounterMetricFamily("logbroker_http_header_timeouts",
                                  "HTTP connections closed: request head not complete within header_timeout_ms",
                                  value=self._count.header_timeouts)

