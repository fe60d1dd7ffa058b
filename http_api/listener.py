"""The HTTP listener: every accepted connection passes through ``ConnectionGuard`` before aiohttp.

aiohttp (3.14) bounds neither the time to send a request head nor the number of connections.
The guard is the protocol factory given to ``loop.create_server`` (by ``GuardedSite``): each
connection gets a ``_Guarded`` protocol that counts it against the node's bound and its peer
address's share (decision 0235; a trusted proxy has no share of its own), refuses it over either,
and otherwise hands every callback to the aiohttp protocol made by the runner's ``web.Server``
while a ``HeadClock`` (``http_api.connections``) watches it. What the clock needs from aiohttp
comes through the server's public ``request_factory`` (a complete head became a request, with its
body stream) and ``request_handler`` (the request's handler returned) attributes, wrapped once
before the listener starts; a connection past its head deadline is closed with the handler's
public ``force_close()``.

Under TLS the listener accepts plain TCP and the guard upgrades each admitted connection with
``loop.start_tls`` (reading paused first, so no ClientHello byte reaches the plain protocol): a
connection is counted from accept, before its handshake, and a handshake that has not completed
within ``tls_handshake_timeout_ms`` (never started included) closes it. A connection refused
under TLS is closed without an answer (answering would take the handshake the bound saves).

A refused plain connection is answered with the problem (503, or 429 at the address's share) and
half-closed, then read and discarded until the peer closes or ``REFUSED_LINGER_S`` passes:
closing a socket with unread bytes would reset it and the peer could lose the answer. At most
``REFUSED_LINGERING_MAX`` linger at once; beyond, they are closed at once.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import ssl
from collections.abc import Callable, Coroutine, Iterator
from typing import Final, cast

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from http_api.connections import (
    ConnectionCount,
    HeadClock,
    Refusal,
    connections_cap,
    per_address_cap,
    refusal,
    refusal_error,
)
from logbroker.config import NodeConfig
from logbroker.proxies import TrustedProxies, parse_address, share_key

REFUSED_LINGER_S: Final = 2.0
REFUSED_LINGERING_MAX: Final = 256
EARLY_BYTES_MAX: Final = 64 * 1024
"""Bytes kept for a TLS connection before its layers are in place (a ClientHello, or the first
bytes of a request decrypted as the handshake ends); more closes the connection."""

RequestFactory = Callable[[RawRequestMessage, StreamReader, RequestHandler, AbstractStreamWriter,
                           "asyncio.Task[None]"], web.BaseRequest]


def descriptor_limit() -> int | None:
    """The process's soft limit on open files (``None``: unlimited), read when the listener starts."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


class ConnectionGuard:
    """Protocol factory and bookkeeping of every connection the listener accepts."""

    def __init__(self, server: web.Server, *, connections_max: int, header_timeout_s: float,
                 per_address_max: int | None = None, trusted: TrustedProxies | None = None,
                 ssl_context: ssl.SSLContext | None = None, handshake_timeout_s: float = 5.0) -> None:
        assert header_timeout_s > 0 and handshake_timeout_s > 0, (header_timeout_s, handshake_timeout_s)
        self.server = server
        self.count = ConnectionCount(connections_max, per_address_max)
        self.header_timeout_s = header_timeout_s
        self.trusted = trusted if trusted is not None else TrustedProxies()
        self.exempt: frozenset[str] = frozenset()  # share keys of the cluster's other nodes (http_api.peers)
        self.ssl_context = ssl_context
        self.handshake_timeout_s = handshake_timeout_s
        self.refusals: dict[Refusal, bytes] = {kind: refusal(refusal_error(kind, self.count))
                                               for kind in ("node", "address")}
        self._by_handler: dict[RequestHandler, _Guarded] = {}
        self._lingering: set[asyncio.Transport] = set()
        self._handshakes: set[asyncio.Task[None]] = set()
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

    def admit(self, transport: asyncio.Transport) -> tuple[Refusal | None, str | None]:
        """Count a connection just accepted: which bound refuses it, and the share key it holds.
        None, no share of its own: a trusted proxy, another node of the cluster, this host (the
        connection comes from the address it reached: this node's own clients, such as the gRPC
        API's), or a socket without an address."""
        address = _address(transport.get_extra_info("peername"))
        if address is None or self.trusted.trusts(address) or address == _address(transport.get_extra_info("sockname")):
            return self.count.admit(None), None
        key = share_key(address)
        if key in self.exempt:
            return self.count.admit(None), None
        return self.count.admit(key), key

    def admitted(self, handler: RequestHandler, guarded: _Guarded) -> None:
        self._by_handler[handler] = guarded

    def lost(self, handler: RequestHandler) -> None:
        del self._by_handler[handler]

    def refuse(self, transport: asyncio.Transport, kind: Refusal) -> None:
        if self.ssl_context is not None:
            transport.abort()
            return
        transport.write(self.refusals[kind])
        if len(self._lingering) >= REFUSED_LINGERING_MAX:
            transport.close()
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._lingering.add(transport)
        asyncio.get_running_loop().call_later(REFUSED_LINGER_S, transport.close)

    def refused_gone(self, transport: asyncio.Transport) -> None:
        self._lingering.discard(transport)

    def handshaking(self, upgrade: Coroutine[None, None, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(upgrade)
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)
        return task

    def close(self) -> None:
        """Close the refused connections still lingering and end the handshakes under way (the
        admitted connections are aiohttp's)."""
        for transport in list(self._lingering):
            transport.close()
        for task in list(self._handshakes):
            task.cancel()


def _address(name: object) -> str | None:
    """The IP address of a socket name (``peername``/``sockname``), IPv4-mapped IPv6 unmapped."""
    if not isinstance(name, tuple) or not name or not isinstance(name[0], str):
        return None
    parsed = parse_address(name[0])
    return str(parsed) if parsed is not None else name[0]


class _Guarded(asyncio.Protocol):
    """One accepted connection: aiohttp's protocol behind a head clock (under TLS once the
    handshake completed), or a refusal. Its place in the count is given back exactly once,
    whichever way it ends (lost, handshake failed or timed out)."""

    __slots__ = ("_clock", "_counted", "_early", "_guard", "_handshake", "_inner", "_key", "_loop", "_timer",
                 "_transport")

    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard
        self._loop = asyncio.get_running_loop()
        self._inner: RequestHandler | None = None
        self._transport: asyncio.Transport | None = None
        self._key: str | None = None
        self._counted = False
        self._handshake: asyncio.Task[None] | None = None
        self._early: bytearray | None = None  # bytes read before TLS took over, or before aiohttp's protocol
        # Made at accept: under TLS the handshake counts towards the first head's deadline.
        self._clock = HeadClock(guard.header_timeout_s, self._loop.time())
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = real = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        refused, self._key = self._guard.admit(real)
        if refused is not None:
            self._guard.refuse(real, refused)
            return
        self._counted = True
        context = self._guard.ssl_context
        if context is None:
            self._start(real)
            return
        # The loop starts reading when this returns, so the ClientHello may come here before the
        # TLS layer takes over: it is kept (reading paused) and handed to that layer right after
        # ``start_tls`` connected it, in the same turn as it resumes reading (``_replay_early``).
        self._early = bytearray()
        self._handshake = self._guard.handshaking(self._upgrade(real, context))
        self._loop.call_soon(self._loop.call_soon, self._replay_early, real)

    async def _upgrade(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        try:
            secure = await self._loop.start_tls(raw, self, context, server_side=True,
                                                ssl_handshake_timeout=self._guard.handshake_timeout_s)
        except (OSError, RuntimeError, ssl.SSLError) as exc:  # a timeout is a ConnectionAbortedError
            self._handshake_failed(exc)
            secure = None
        finally:
            self._handshake = None
        if secure is None or secure.is_closing() or not self._counted:
            raw.abort()
            self._release()
            return
        self._start(secure)

    def _replay_early(self, raw: asyncio.Transport) -> None:
        """Give the bytes read before ``start_tls`` to the TLS layer it put on ``raw``."""
        early, self._early = self._early, bytearray()
        layer = raw.get_protocol()  # uvloop's SSLProtocol is buffered but not a BufferedProtocol subclass
        if not early or raw.is_closing() or layer is self or not hasattr(layer, "buffer_updated"):
            return
        layer = cast(asyncio.BufferedProtocol, layer)
        view = memoryview(early)
        while view:
            buffer = memoryview(layer.get_buffer(len(view)))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            layer.buffer_updated(size)
            view = view[size:]

    def _start(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        inner = self._guard.server()
        assert not isinstance(inner, asyncio.BufferedProtocol), "aiohttp's protocol changed; see listener.py"
        self._inner = inner
        self._guard.admitted(inner, self)
        inner.connection_made(transport)
        self._arm()
        early, self._early = self._early, None
        if early:  # the request's first bytes, decrypted before the handshake's waiter woke this up
            self.data_received(bytes(early))

    def _handshake_failed(self, exc: BaseException | None) -> None:
        """Count a handshake timeout once (the TLS layer may report it to ``connection_lost``, then
        to ``_upgrade``); the connection is released by the caller."""
        if self._counted and isinstance(exc, ConnectionAbortedError):
            self._guard.count.handshake_timeouts += 1

    def _release(self) -> None:
        if self._counted:
            self._counted = False
            self._guard.count.release(self._key)

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            self._keep_early(data)
            return
        if self._clock.received(self._loop.time()):
            self._arm()
        self._inner.data_received(data)

    def _keep_early(self, data: bytes) -> None:
        if self._early is None or self._transport is None:
            return  # a refused connection: its request is not read
        self._early += data
        if self._transport.get_protocol() is self:  # the plain transport, before start_tls took it over
            self._transport.pause_reading()
        if len(self._early) > EARLY_BYTES_MAX:
            self._transport.abort()

    def eof_received(self) -> bool | None:
        if self._inner is not None:
            self._inner.eof_received()
        return None  # close the transport, as aiohttp's protocol does

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        inner, self._inner = self._inner, None
        if inner is not None:
            self._guard.lost(inner)
            self._release()
            inner.connection_lost(exc)
            return
        if not self._counted:
            if self._transport is not None:
                self._guard.refused_gone(self._transport)
            return
        self._handshake_failed(exc)  # lost during the TLS handshake
        self._release()
        if self._handshake is not None:
            self._handshake.cancel()

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
        cap = connections_cap(config.connections_max, descriptor_limit())
        self.guard = ConnectionGuard(
            runner.server, connections_max=cap, header_timeout_s=config.header_timeout_ms / 1000,
            per_address_max=per_address_cap(config.connections_per_address_max, cap),
            trusted=TrustedProxies.parse(config.trusted_proxies), ssl_context=ssl_context,
            handshake_timeout_s=min(config.tls_handshake_timeout_ms, config.header_timeout_ms) / 1000)
        self._host = config.http_host
        self._port = config.http_port

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        """Listen on plain TCP; the guard does the TLS handshake itself (see the module doc)."""
        await super().start()
        loop = asyncio.get_running_loop()
        if self._sock is not None:
            self._server = await loop.create_server(self.guard, sock=self._sock, backlog=self._backlog)
            return
        self._server = await loop.create_server(self.guard, self._host, self._port, backlog=self._backlog,
                                                reuse_address=True)

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
        yield GaugeMetricFamily("logbroker_http_connections_per_address_max",
                                "Bound on open HTTP connections from one address (an IPv6 /64)",
                                value=self._count.per_address)
        yield CounterMetricFamily("logbroker_http_connections_refused",
                                  "HTTP connections refused (503) at the bound", value=self._count.refused)
        yield CounterMetricFamily("logbroker_http_connections_refused_per_address",
                                  "HTTP connections refused (429) at their address's share",
                                  value=self._count.refused_per_address)
        yield CounterMetricFamily("logbroker_http_tls_handshake_timeouts",
                                  "HTTPS connections closed: no TLS handshake within tls_handshake_timeout_ms",
                                  value=self._count.handshake_timeouts)
        yield CounterMetricFamily("logbroker_http_header_timeouts",
                                  "HTTP connections closed: request head not complete within header_timeout_ms",
                                  value=self._count.header_timeouts)

