"""An in-memory network for ``SimLoop``: ``create_connection`` / ``create_server`` (and so
``asyncio.open_connection`` / ``start_server``) over simulated TCP links between named hosts.

What a link does, each choice drawn from the run's seeded generator on virtual time:

- delay: each chunk arrives ``delay_min_s``..``delay_max_s`` after it is sent, in order (a stream
  never reorders);
- partition (``cut(a, b)``): nothing crosses, either way. Chunks already sent wait, as TCP
  retransmits them, and arrive after ``heal``; a connection cut longer than ``cut_break_s`` breaks
  (``TimeoutError``, as keepalive or retransmission gives up); a connect across a cut waits for the
  heal up to ``connect_give_up_s``, then fails with ``TimeoutError``;
- drop (``reset(a, b)``): every connection between ``a`` and ``b`` breaks now
  (``ConnectionResetError`` on both sides);
- duplication: never (TCP does not duplicate what it delivers).

Which host a connection comes from is the ``CURRENT_HOST`` of the task that opens it: start a
node's tasks with ``spawn(host, coro)`` and everything they start inherits the host. ``127.0.0.1``
and ``localhost`` mean the caller's own host. Flow control is asyncio's: a sender whose link holds
more than ``HIGH_WATER_BYTES`` unread is paused (``drain`` waits), a reader that pauses reading
keeps what arrives until it resumes; a writer that ignores ``drain`` past ``BUFFER_MAX_BYTES``
breaks its connection (``ENOBUFS``), so no link grows without bound. No TLS: the simulated
cluster runs its RPC in plaintext.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import dataclasses
import errno
import random
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from sim.loop import CURRENT_HOST, RealWorldError, SimLoop
from sim.trace import Trace

T = TypeVar("T")
__all__ = ["CURRENT_HOST", "NetworkOptions", "SimNetwork", "SimServer"]
LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", ""})
HIGH_WATER_BYTES: Final = 1024 * 1024
BUFFER_MAX_BYTES: Final = 256 * 1024 * 1024  # unread on one link: past it the connection breaks (ENOBUFS)
LOW_WATER_BYTES: Final = 256 * 1024
FIRST_PORT: Final = 40_000
SYN_RETRY_S: Final = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class NetworkOptions:
    delay_min_s: float = 0.0002
    delay_max_s: float = 0.002
    cut_break_s: float = 20.0
    connect_give_up_s: float = 31.0


class _Socket:
    """What ``Server.sockets`` and ``get_extra_info`` show: an address, no descriptor."""

    def __init__(self, host: str, port: int) -> None:
        self._address = (host, port)

    def getsockname(self) -> tuple[str, int]:
        return self._address


class SimServer(asyncio.AbstractServer):
    def __init__(self, network: SimNetwork, host: str, port: int) -> None:
        self._network = network
        self.host, self.port = host, port
        self._serving = True

    @property
    def sockets(self) -> tuple[_Socket, ...]:
        return (_Socket(self.host, self.port),) if self._serving else ()

    def close(self) -> None:
        if self._serving:
            self._serving = False
            self._network._unlisten(self)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._network.loop

    def is_serving(self) -> bool:
        return self._serving

    async def start_serving(self) -> None:
        pass

    async def serve_forever(self) -> None:
        raise RealWorldError("serve_forever is not simulated; keep the server open instead")

    async def wait_closed(self) -> None:
        pass


@dataclasses.dataclass(slots=True)
class _Listener:
    server: SimServer
    protocol_factory: Callable[[], asyncio.BaseProtocol]
    context: contextvars.Context


class _End(asyncio.Transport):
    """One side of a simulated connection: what this side's protocol writes to."""

    def __init__(self, connection: _Connection, host: str, port: int, context: contextvars.Context) -> None:
        super().__init__()
        self._connection = connection
        self.host, self.port = host, port
        self.context = context
        self.protocol: asyncio.Protocol | None = None
        self.peer: _End | None = None
        self.outgoing = _Pipe(self)
        self.closing = False  # close() or abort() called, or the connection broke
        self.lost = False  # connection_lost called (or scheduled)
        self._reading = True
        self._held: collections.deque[bytes] = collections.deque()  # arrived while reading was paused
        self._writing_paused = False

    # ---- asyncio.Transport ----------------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        assert self.peer is not None
        return {"peername": (self.peer.host, self.peer.port), "sockname": (self.host, self.port),
                "socket": None}.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data or self.closing:
            return
        if self.outgoing.unread + len(data) > BUFFER_MAX_BYTES:  # a writer that never waits for drain
            self.broken(OSError(errno.ENOBUFS, f"more than {BUFFER_MAX_BYTES} bytes unread on the link"))
            return
        self.outgoing.send("data", bytes(data))
        self._check_water()

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if not self.closing:
            self.outgoing.send("fin", b"")

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.outgoing.send("fin", b"")
        self._connection.network.trace(f"close {self._connection.name} by {self.host}")
        self._lose(None)

    def abort(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.outgoing.clear()
        self.outgoing.send("rst", b"")
        self._connection.network.trace(f"abort {self._connection.name} by {self.host}")
        self._lose(None)

    def get_write_buffer_size(self) -> int:
        return self.outgoing.unread

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return LOW_WATER_BYTES, HIGH_WATER_BYTES

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def is_reading(self) -> bool:
        return self._reading and not self.lost

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        if self._reading:
            return
        self._reading = True
        loop = self._connection.network.loop
        loop.call_soon(self._release, context=self.context)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.Protocol)
        self.protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self.protocol is not None
        return self.protocol

    # ---- the simulated kernel -------------------------------------------------------------------

    def _check_water(self) -> None:
        protocol = self.protocol
        if protocol is None or self.lost:
            return
        unread = self.outgoing.unread
        if not self._writing_paused and unread > HIGH_WATER_BYTES:
            self._writing_paused = True
            protocol.pause_writing()
        elif self._writing_paused and unread <= LOW_WATER_BYTES:
            self._writing_paused = False
            protocol.resume_writing()

    def _release(self) -> None:
        """Hand over what arrived while reading was paused (until it pauses again)."""
        assert self.peer is not None
        while self._held and self._reading and not self.lost and self.protocol is not None:
            data = self._held.popleft()
            self.peer.outgoing.read(len(data))
            self.protocol.data_received(data)

    def receive(self, kind: str, data: bytes) -> None:
        """A chunk from the peer arrives (run in this side's context)."""
        assert self.peer is not None
        if self.lost:
            self.peer.outgoing.read(len(data))
            if kind == "data":  # data for a closed socket: its kernel answers with a reset
                self.outgoing.send("rst", b"")
            return
        protocol = self.protocol
        assert protocol is not None
        if kind == "data":
            if self._reading and not self._held:
                self.peer.outgoing.read(len(data))
                protocol.data_received(data)
            else:
                self._held.append(data)
        elif kind == "fin":
            if not protocol.eof_received():
                self.close()
        else:
            self.broken(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"))

    def broken(self, exc: Exception) -> None:
        """The connection broke under this side (reset, timed out)."""
        if self.lost:
            return
        self.closing = True
        self.outgoing.clear()
        self._connection.network.trace(f"broken {self._connection.name} at {self.host}: {type(exc).__name__}")
        self._lose(exc)

    def _lose(self, exc: Exception | None) -> None:
        if self.lost:
            return
        self.lost = True
        self._held.clear()
        protocol = self.protocol
        if protocol is not None:
            self._connection.network.loop.call_soon(protocol.connection_lost, exc, context=self.context)


class _Pipe:
    """One direction of a connection: chunks in flight, delivered in order after their delay."""

    def __init__(self, sender: _End) -> None:
        self._sender = sender
        self._queue: collections.deque[tuple[float, str, bytes]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._last_due = 0.0
        self.unread = 0  # bytes sent and not yet handed to the reader

    def send(self, kind: str, data: bytes) -> None:
        network = self._sender._connection.network
        due = max(network.loop.time() + network.delay(), self._last_due)
        self._last_due = due
        self._queue.append((due, kind, data))
        self.unread += len(data)
        self.arm()

    def read(self, size: int) -> None:
        self.unread -= size
        self._sender._check_water()

    def clear(self) -> None:
        self._queue.clear()
        self.unread = 0
        self.stop()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def restart(self) -> None:
        """After a heal: what waited goes out again (retransmitted), each with a fresh delay."""
        network = self._sender._connection.network
        waiting, self._queue = self._queue, collections.deque()
        self._last_due = 0.0
        for _, kind, data in waiting:
            due = max(network.loop.time() + network.delay(), self._last_due)
            self._last_due = due
            self._queue.append((due, kind, data))
        self.arm()

    def arm(self) -> None:
        connection = self._sender._connection
        peer = self._sender.peer
        if self._timer is not None or not self._queue or peer is None or connection.network.is_cut(
                self._sender.host, peer.host):
            return
        self._timer = connection.network.loop.call_at(self._queue[0][0], self._deliver, context=peer.context)

    def _deliver(self) -> None:
        self._timer = None
        peer = self._sender.peer
        assert peer is not None and self._queue
        _, kind, data = self._queue.popleft()
        self.arm()
        peer.receive(kind, data)


class _Connection:
    def __init__(self, network: SimNetwork, name: str) -> None:
        self.network = network
        self.name = name
        self.ends: tuple[_End, _End] | None = None
        self.break_timer: asyncio.TimerHandle | None = None

    def between(self, a: str, b: str) -> bool:
        assert self.ends is not None
        return {self.ends[0].host, self.ends[1].host} == {a, b}

    def live(self) -> bool:
        assert self.ends is not None
        return not (self.ends[0].lost and self.ends[1].lost)


class SimNetwork:
    def __init__(self, loop: SimLoop, rng: random.Random, trace: Trace,
                 options: NetworkOptions = NetworkOptions()) -> None:
        self.loop = loop
        self._rng = rng
        self._trace = trace
        self.options = options
        self._listeners: dict[tuple[str, int], _Listener] = {}
        self._next_port: dict[str, int] = {}
        self._cuts: set[frozenset[str]] = set()
        self._connections: list[_Connection] = []
        self._connection_count = 0
        loop.network = self

    # ---- the schedule's controls ----------------------------------------------------------------

    def spawn(self, host: str, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        """Start ``coro`` as code running on ``host``: its connections come from there."""
        context = contextvars.copy_context()
        context.run(CURRENT_HOST.set, host)
        return self.loop.create_task(coro, name=name, context=context)

    def trace(self, event: str) -> None:
        self._trace.add(self.loop.time(), event)

    def delay(self) -> float:
        return self._rng.uniform(self.options.delay_min_s, self.options.delay_max_s)

    def is_cut(self, a: str, b: str) -> bool:
        return a != b and frozenset((a, b)) in self._cuts

    def cut(self, a: str, b: str) -> None:
        """Partition ``a`` from ``b`` (both ways)."""
        if a == b or self.is_cut(a, b):
            return
        self._cuts.add(frozenset((a, b)))
        self.trace(f"cut {min(a, b)}-{max(a, b)}")
        for connection in self._live_between(a, b):
            assert connection.ends is not None
            for end in connection.ends:
                end.outgoing.stop()
            connection.break_timer = self.loop.call_later(self.options.cut_break_s, self._break, connection)

    def heal(self, a: str, b: str) -> None:
        if not self.is_cut(a, b):
            return
        self._cuts.discard(frozenset((a, b)))
        self.trace(f"heal {min(a, b)}-{max(a, b)}")
        for connection in self._live_between(a, b):
            assert connection.ends is not None
            if connection.break_timer is not None:
                connection.break_timer.cancel()
                connection.break_timer = None
            for end in connection.ends:
                end.outgoing.restart()

    def heal_all(self) -> None:
        for pair in sorted(tuple(sorted(p)) for p in self._cuts):
            self.heal(*pair)

    def reset(self, a: str, b: str) -> None:
        """Break every connection between ``a`` and ``b`` now (both sides see a reset)."""
        self.trace(f"reset {min(a, b)}-{max(a, b)}")
        for connection in self._live_between(a, b):
            assert connection.ends is not None
            for end in connection.ends:
                end.broken(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"))

    def crash(self, host: str) -> None:
        """``host``'s process dies: its listeners go, and its kernel resets every connection it had
        (the other side sees ``ConnectionResetError`` after the link's delay; its own side hears
        nothing, its code is gone)."""
        self.trace(f"crash {host}")
        for key in sorted(k for k in self._listeners if k[0] == host):
            self._listeners[key].server.close()
        self._connections = [c for c in self._connections if c.live()]
        for connection in self._connections:
            assert connection.ends is not None
            for end in connection.ends:
                if end.host == host and not end.lost:
                    end.closing = end.lost = True
                    end.outgoing.clear()
                    end.outgoing.send("rst", b"")

    def _break(self, connection: _Connection) -> None:
        connection.break_timer = None
        assert connection.ends is not None
        for end in connection.ends:
            end.broken(TimeoutError(errno.ETIMEDOUT, "Connection timed out"))

    def _live_between(self, a: str, b: str) -> list[_Connection]:
        self._connections = [c for c in self._connections if c.live()]
        return [c for c in self._connections if c.between(a, b)]

    # ---- what the loop's create_server / create_connection call ---------------------------------

    def _host(self, host: Any) -> str:
        here = CURRENT_HOST.get()
        if host is None or (isinstance(host, str) and host in LOOPBACK):
            return here
        if isinstance(host, (list, tuple)) and len(host) == 1:
            return self._host(host[0])
        if not isinstance(host, str):
            raise RealWorldError(f"a simulated host is one name, not {host!r}")
        return host

    async def listen(self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: Any, port: int | None,
                     *, ssl: Any = None, **kwargs: Any) -> SimServer:
        if ssl is not None:
            raise RealWorldError("TLS is not simulated: run the simulated cluster's RPC in plaintext")
        name = self._host(host)
        if not port:
            port = self._next_port.get(name, FIRST_PORT)
            self._next_port[name] = port + 1
        if (name, port) in self._listeners:
            raise OSError(errno.EADDRINUSE, f"address already in use: {name}:{port}")
        server = SimServer(self, name, port)
        self._listeners[(name, port)] = _Listener(server, protocol_factory, contextvars.copy_context())
        self.trace(f"listen {name}:{port}")
        return server

    def _unlisten(self, server: SimServer) -> None:
        self._listeners.pop((server.host, server.port), None)
        self.trace(f"unlisten {server.host}:{server.port}")

    async def connect(self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: Any, port: int | None,
                      *, ssl: Any = None, **kwargs: Any) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        if ssl:
            raise RealWorldError("TLS is not simulated: run the simulated cluster's RPC in plaintext")
        if port is None:
            raise ValueError("a simulated connection needs a port")
        source, target = CURRENT_HOST.get(), self._host(host)
        self._connection_count += 1
        name = f"c{self._connection_count}:{source}>{target}:{port}"
        started = self.loop.time()
        await asyncio.sleep(self.delay())  # the SYN on its way
        while self.is_cut(source, target):
            if self.loop.time() - started >= self.options.connect_give_up_s:
                self.trace(f"connect {name} timed out")
                raise TimeoutError(errno.ETIMEDOUT, f"Connect call failed ({target!r}, {port})")
            await asyncio.sleep(SYN_RETRY_S)
        listener = self._listeners.get((target, port))
        await asyncio.sleep(self.delay())  # the answer on its way back
        if listener is None or self.is_cut(source, target):
            self.trace(f"connect {name} refused")
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"Connect call failed ({target!r}, {port})")
        connection = _Connection(self, name)
        client = _End(connection, source, self._ephemeral(source), contextvars.copy_context())
        server = _End(connection, target, port, listener.context)
        client.peer, server.peer = server, client
        connection.ends = (client, server)
        self._connections.append(connection)
        protocol = protocol_factory()
        client.set_protocol(protocol)
        server_protocol = listener.context.run(listener.protocol_factory)
        server.set_protocol(server_protocol)
        self.loop.call_soon(server_protocol.connection_made, server, context=listener.context)
        protocol.connection_made(client)
        self.trace(f"connect {name}")
        return client, protocol

    def _ephemeral(self, host: str) -> int:
        port = self._next_port.get(host, FIRST_PORT)
        self._next_port[host] = port + 1
        return port
