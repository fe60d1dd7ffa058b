"""The Kafka listener of a node (DESIGN §4c): ``--kafka-port`` (0 picks a free port), bound before
the node starts so a cluster node advertises its real address, TLS with the node's certificate
when HTTPS is on (``SASL_SSL``), SASL PLAIN or OAUTHBEARER when auth is on (``SASL_PLAINTEXT``).

One task per connection reads a request, answers it and reads the next, so answers go out in the
order of the requests (what Kafka clients expect; a broker does the same). Bounds: connections, in
the HTTP listener's budget (the node's bound and each address's share by HTTP's rules, an IPv6
/64 as one) and the user's ``connections_max`` once authenticated; a request's size (the node's
``request_body_bytes_max`` plus room for the header; before authentication
``PRE_AUTH_FRAME_MAX``), checked before it is read; ``AUTH_TIMEOUT_S`` from the connection's
start to authenticate (after a SaslHandshake v0 the SASL message and its answer go without
request headers, as older clients send them); ``body_timeout_ms`` for a request's bytes once its
size has arrived; ``IDLE_S`` between requests (each enforced within ``WATCH_S`` by one watcher
that aborts the connections past their deadline). A frame that is not a request of an API and
version in ``kafka_api.apis``, a body that does not decode, or a request other than ApiVersions
or SASL before authentication closes the connection (a Kafka broker closes it too); ApiVersions
of a version past ours is answered, as v0, UNSUPPORTED_VERSION with the versions we serve.
A user deleted (or made again under its name), whose password changed or whose tokens were
revoked loses its connections at its next request after ``access_recheck_ms``; its quota limits
are read again then too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import operator
import socket
import ssl
import time
from typing import Any, Final, Protocol

from kafka_api import entities, hot_codecs, sasl, wire
from kafka_api.apis import API_VERSIONS_KEY, BY_KEY, advertised
from kafka_api.handlers import KafkaHandlers
from kafka_api.session import Session
from logbroker.api import BrokerApi
from logbroker.config import NodeConfig
from logbroker.errors import ANY_ERROR
from logbroker.node import Node

log = logging.getLogger(__name__)
UNSUPPORTED_VERSION: Final = 35
AUTH_TIMEOUT_S: Final = 10.0
IDLE_S: Final = 600.0  # Kafka's connections.max.idle.ms
HEADER_ROOM_BYTES: Final = 64 * 1024
PRE_AUTH_FRAME_MAX: Final = sasl.MESSAGE_BYTES_MAX + HEADER_ROOM_BYTES
STOP_GRACE_S: Final = 5.0
LISTEN_BACKLOG: Final = 1024
WATCH_S: Final = 0.1  # how often the listener looks for connections past their deadline


class Deadline:
    """When a connection's wait for its next bytes ends (loop time; infinite while a request is
    answered) and what it waits for. One watcher per listener aborts the connections past theirs
    every ``WATCH_S`` (decision 0405): a timer armed and cancelled around each read cost more than
    the rest of a one-record Produce's framing."""

    __slots__ = ("at", "expired", "transport", "waiting_for")

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport
        self.at = math.inf
        self.waiting_for = ""
        self.expired = False

    def wait(self, seconds: float, what: str) -> None:
        self.at = asyncio.get_running_loop().time() + seconds
        self.waiting_for = what

    def clear(self) -> None:
        self.at = math.inf


class Counted(Protocol):
    def release(self, key: str | None = None) -> None: ...


class ConnectionBudget(Protocol):
    """The HTTP listener's guard (``http_api.listener.ConnectionGuard``): ``admit`` counts a
    connection against the node's bound and its address's share (none for this host, trusted
    proxies and the cluster's nodes), saying which refuses it and the share key it holds."""

    @property
    def count(self) -> Counted: ...

    def admit(self, transport: Any) -> tuple[str | None, str | None]: ...


class KafkaServer:
    def __init__(self, config: NodeConfig, *, ssl_context: ssl.SSLContext | None) -> None:
        family = socket.AF_INET6 if ":" in config.http_host else socket.AF_INET
        self.config = config
        self._sock = socket.create_server((config.http_host, config.kafka_port), family=family,
                                          backlog=LISTEN_BACKLOG)
        self.port: int = self._sock.getsockname()[1]
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], Deadline] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._budget: ConnectionBudget | None = None
        self._frame_max = config.request_body_bytes_max + HEADER_ROOM_BYTES
        self.handlers: KafkaHandlers | None = None
        self.node: Node | None = None

    def address(self, host: str, port: int = 0) -> str:
        """The address clients are told: ``host`` and ``port``, or the listener's own port for 0."""
        return f"{host}:{port or self.port}"

    async def start(self, node: Node, connections: ConnectionBudget) -> None:
        """Serve ``node``; ``connections`` is the budget the node's HTTP listener counts its
        connections in (the node's bound and each address's share), which Kafka's take from too."""
        self.node = node
        self._budget = connections
        self.handlers = KafkaHandlers(node, BrokerApi(node))
        node.live_groups.append(self.handlers.groups)  # Kafka's groups in GET /v1/groups and the console
        tls: dict[str, Any] = {} if self._ssl is None else {
            "ssl": self._ssl, "ssl_handshake_timeout": self.config.tls_handshake_timeout_ms / 1000}
        self._server = await asyncio.start_server(self._accept, sock=self._sock, **tls)
        self._watcher = asyncio.create_task(self._watch(), name="kafka-deadlines")

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            self._sock.close()
            return
        server.close()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=STOP_GRACE_S)
        if self.handlers is not None:  # after the connections: none can start its ticker again
            await self.handlers.groups.close()
            self.handlers.checks.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_GRACE_S):
                await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        budget = self._budget
        assert budget is not None
        refused, key = budget.admit(writer.transport)
        if refused is not None:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        deadline = self._connections[task] = Deadline(writer.transport)
        try:
            await self._serve(reader, writer, Session(address), deadline)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ssl.SSLError, wire.FrameError,
                wire.HeaderError, entities.BodyError) as exc:
            reason = f"no {deadline.waiting_for} in time" if deadline.expired else repr(exc)[:200]
            log.debug("kafka connection closed", extra={"fields": {"peer": address, "reason": reason}})
        except Exception:  # a bug: this connection ends, the listener goes on
            log.exception("kafka request failed", extra={"fields": {"peer": address}})
        finally:
            self._connections.pop(task, None)
            budget.count.release(key)
            writer.transport.abort()

    async def _watch(self) -> None:
        """Abort each connection past its deadline (its read then ends, and the connection)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(WATCH_S)
            now = loop.time()
            for deadline in list(self._connections.values()):
                if deadline.at < now and not deadline.expired:
                    deadline.expired = True
                    try:
                        deadline.transport.abort()
                    except Exception:  # one transport's failure must not end the watch over all the others
                        log.exception("aborting a kafka connection past its deadline failed")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: Session,
                     deadline: Deadline) -> None:
        node, handlers = self.node, self.handlers
        assert node is not None and handlers is not None
        if not node.auth.enabled:
            session.principal, session.limits = await node.auth.authenticate(None)
        body_s = self.config.body_timeout_ms / 1000
        login_by = time.monotonic() + AUTH_TIMEOUT_S  # the whole login, not each of its requests
        checked_at = time.monotonic()
        while not session.failed:
            authenticated = session.principal is not None
            wait_s = IDLE_S if authenticated else login_by - time.monotonic()
            if wait_s <= 0:
                return
            deadline.wait(wait_s, "request" if authenticated else "login")
            prefix = await reader.readexactly(wire.SIZE.size)
            if session.unframed_sasl:
                size = wire.frame_size(prefix, sasl.MESSAGE_BYTES_MAX, size_min=0)
            else:  # before authentication only ApiVersions and SASL, all small
                size = wire.frame_size(prefix, self._frame_max if authenticated else PRE_AUTH_FRAME_MAX)
            deadline.wait(body_s, "request body")
            frame = await reader.readexactly(size)
            deadline.clear()
            if authenticated and node.auth.enabled \
                    and time.monotonic() - checked_at >= self.config.access_recheck_ms / 1000:
                if not await self._still_valid(session):
                    return
                checked_at = time.monotonic()
            if session.unframed_sasl:  # after a v0 handshake: a bare message, a bare (empty) answer
                result = await handlers.authenticate(session, frame)
                if result["error_code"]:
                    return
                answer: bytes | None = wire.SIZE.pack(0)
            else:
                answer = await self._answer(session, frame)
            if answer is not None:
                writer.write(answer)
                await writer.drain()
            if not authenticated and session.principal is not None and node.auth.enabled:
                try:  # the user's share of connections, as for HTTP
                    node.auth.admit_connection(session.principal, writer, session.context().limits)
                except ANY_ERROR:
                    return

    async def _answer(self, session: Session, frame: bytes) -> bytes | None:
        """The response frame to one request (None: it gets none); an error closes the connection."""
        handlers = self.handlers
        assert handlers is not None
        api_key, version, correlation_id = wire.peek_key(frame)
        api = BY_KEY.get(api_key)
        if api is None:
            raise wire.FrameError(f"API key {api_key} is not served here")
        if not api.serves(version):
            if api_key == API_VERSIONS_KEY:  # answered in v0, which every client reads
                body = entities.encode(entities.build(entities.response_class(api_key, 0), {
                    "error_code": UNSUPPORTED_VERSION, "api_keys": advertised()}))
                return wire.response_frame(correlation_id, body, flexible_header=False)
            raise wire.FrameError(f"{api.name} v{version} is not served here")
        flexible = entities.flexible(api_key, version)
        header = wire.read_header(frame, flexible=flexible)
        session.client_id = header.client_id or ""
        if session.principal is None and not api.before_auth:
            raise wire.FrameError(f"{api.name} before authentication")
        if session.expires_at is not None and not api.before_auth and time.time() >= session.expires_at:
            raise wire.FrameError(f"{api.name} after the session's token expired (re-authenticate, KIP-368)")
        request = entities.read_request(api_key, version, frame, header.body_offset)
        values: dict[str, Any] | None = await operator.attrgetter(api.name)(handlers)(session, request)
        if values is None:
            return None
        parts = hot_codecs.encode_response(api_key, version, values)
        written = entities.encode(entities.build(entities.response_class(api_key, version), values)) \
            if parts is None else parts
        return wire.response_frame(correlation_id, written, flexible_header=flexible and api_key != API_VERSIONS_KEY)

    async def _still_valid(self, session: Session) -> bool:
        """Whether the session's user still stands: the same user (not deleted, nor made again
        under its name), its password and tokens unchanged; its quota limits are read again."""
        node = self.node
        assert node is not None and session.principal is not None
        try:
            user = await node.auth.user(session.principal.name)
        except ANY_ERROR:
            return False
        if (user.user_id, user.credential_version) != (session.user_id, session.credential_version):
            return False
        session.limits = node.auth.limits.override(user.quotas) if user.quotas else node.auth.limits
        return True
