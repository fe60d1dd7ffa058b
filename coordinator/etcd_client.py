"""A thin, bounded etcd v3 client on gRPC (decision 0181).

It uses the generated etcd stubs and messages that ``aetcd`` ships (they load with protobuf 7)
over one ``grpc.aio`` channel of our own, so every call carries its own deadline and the
coordinator sees each transaction's revision. Every failure to reach etcd (an RPC error, a
deadline, a call ended by ``reconnect``) is a ``CoordinatorUnavailableError`` naming the
endpoints. The channel reconnects by itself with a short, bounded backoff (etcd restarts are
seconds, not minutes); ``reconnect`` replaces it with a new one (the session does, once lost).

Security (DESIGN §5, decision 0226): ``etcds://`` (or TLS files given with ``etcd://``) makes the
channel TLS, verifying etcd's certificate against ``ca_file`` and presenting ``cert_file`` as the
client certificate etcd's ``--client-cert-auth`` asks for. With ``user``, every call also carries
an etcd auth token: fetched with the password on a separate channel the first time a call needs
it, and again after etcd says it is no longer valid (user auth needs TLS: a password never
crosses a plain channel).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Final

import grpc
from aetcd import rpc

from coordinator.errors import CoordinatorError, CoordinatorUnavailableError
from coordinator.etcd_keys import prefix_range_end

URL_SCHEME: Final = "etcd://"
TLS_URL_SCHEME: Final = "etcds://"
AUTH_TIMEOUT_S: Final = 5.0
CALL_TIMEOUT_S: Final = 5.0
RANGE_PAGE: Final = 2000
MESSAGE_BYTES_MAX: Final = 64 * 1024 * 1024
CHANNEL_OPTIONS: Final = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 250),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
)
# etcd's Compare enums (rpc.proto)
EQUAL, GREATER = 0, 1
VERSION, CREATE, MOD, VALUE = 0, 1, 2, 3
EVENT_PUT, EVENT_DELETE = 0, 1


def url_scheme(url: str) -> str:
    """``etcd://`` or ``etcds://`` (TLS), the scheme ``url`` starts with (``CoordinatorError``
    for any other)."""
    for scheme in (TLS_URL_SCHEME, URL_SCHEME):
        if url.startswith(scheme):
            return scheme
    raise CoordinatorError(f"an etcd coordinator URL starts with {URL_SCHEME} or {TLS_URL_SCHEME}: {url!r}")


def parse_etcd_url(url: str) -> list[str]:
    """``etcd://h:p,h2:p2`` (or ``etcds://``) -> ``["h:p", "h2:p2"]`` (``CoordinatorError`` when
    malformed)."""
    scheme = url_scheme(url)
    endpoints = [e.strip() for e in url[len(scheme):].split(",") if e.strip()]
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CoordinatorError(f"an etcd endpoint is host:port, not {endpoint!r} (in {url!r})")
    if not endpoints:
        raise CoordinatorError(f"no etcd endpoint in {url!r}")
    return endpoints


@dataclasses.dataclass(frozen=True, slots=True)
class EtcdAccess:
    """How a node reaches etcd: TLS files (all three, or none: plaintext) and an optional etcd user."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    user: str = ""
    password: str = dataclasses.field(default="", repr=False)

    def __post_init__(self) -> None:
        files = (self.ca_file, self.cert_file, self.key_file)
        if any(files) and not all(files):
            missing = [n for n, v in zip(("etcd_ca_file", "etcd_cert_file", "etcd_key_file"), files, strict=True)
                       if not v]
            raise CoordinatorError(f"etcd TLS is half configured: {', '.join(missing)} missing (etcd_ca_file, "
                                   "etcd_cert_file and etcd_key_file go together)")
        if self.user and not self.tls:
            raise CoordinatorError("etcd_user needs TLS to etcd (etcd_ca_file, etcd_cert_file, etcd_key_file): "
                                   "the password must not cross a plain channel")
        if bool(self.user) != bool(self.password):
            raise CoordinatorError("etcd_user and its password (LOGBROKER_ETCD_PASSWORD) go together")

    @property
    def tls(self) -> bool:
        return bool(self.ca_file)

    @classmethod
    def for_url(cls, url: str, ca_file: str = "", cert_file: str = "", key_file: str = "", user: str = "",
                password: str = "") -> EtcdAccess:
        """The access for ``url``: ``etcds://`` requires the TLS files; ``etcd://`` with them is TLS too."""
        access = cls(ca_file, cert_file, key_file, user, password)
        if url_scheme(url) == TLS_URL_SCHEME and not access.tls:
            raise CoordinatorError(f"{url} asks for TLS: give etcd_ca_file, etcd_cert_file and etcd_key_file")
        return access

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel's TLS credentials (files read once, here)."""
        def read(path: str) -> bytes:
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as exc:
                raise CoordinatorError(f"cannot read an etcd TLS file: {exc}") from exc
        return grpc.ssl_channel_credentials(read(self.ca_file), read(self.key_file), read(self.cert_file))


def replaced_call() -> bool:
    """Inside ``except CancelledError``: True when what was cancelled is a call (its channel
    closed by ``EtcdClient.reconnect``), not the running task itself."""
    task = asyncio.current_task()
    return task is not None and not task.cancelling()


def _is_auth_error(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and (
        exc.code() == grpc.StatusCode.UNAUTHENTICATED or "auth token" in (exc.details() or ""))


class _TokenPlugin(grpc.AuthMetadataPlugin):  # type: ignore[misc]
    """Adds etcd's auth token to every call; fetches one (blocking, on gRPC's own thread, bounded)
    when there is none. A separate channel without this plugin asks for it."""

    def __init__(self, target: str, access: EtcdAccess, options: Sequence[tuple[str, Any]]) -> None:
        self._target, self._access, self._options = target, access, options
        self._lock = threading.Lock()
        self.token = ""

    def _authenticate(self) -> str:
        with grpc.secure_channel(self._target, self._access.credentials(), options=self._options) as channel:
            resp = rpc.AuthStub(channel).Authenticate(
                rpc.AuthenticateRequest(name=self._access.user, password=self._access.password),
                timeout=AUTH_TIMEOUT_S)
        return str(resp.token)

    def __call__(self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback) -> None:
        try:
            with self._lock:
                if not self.token:
                    self.token = self._authenticate()
                token = self.token
        except grpc.RpcError as exc:
            callback((), exc)
            return
        callback((("token", token),), None)


def grpc_target(endpoints: Sequence[str]) -> str:
    """One gRPC target for all endpoints: several IPv4 addresses form an ``ipv4:`` list, so the
    channel fails over between them; host names are resolved once here."""
    if len(endpoints) == 1:
        return endpoints[0]
    addresses = []
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            host = socket.gethostbyname(host)
        addresses.append(f"{host}:{port}")
    return "ipv4:" + ",".join(addresses)


def cmp_create(key: bytes, revision: int) -> Any:
    """The key's create revision is ``revision`` (0: the key is absent)."""
    return rpc.Compare(result=EQUAL, target=CREATE, key=key, create_revision=revision)


def cmp_mod(key: bytes, revision: int) -> Any:
    """The key's mod revision is ``revision`` (0: absent): nothing changed it since it was read."""
    return rpc.Compare(result=EQUAL, target=MOD, key=key, mod_revision=revision)


def cmp_exists(key: bytes) -> Any:
    return rpc.Compare(result=GREATER, target=VERSION, key=key, version=0)


def cmp_value(key: bytes, value: bytes) -> Any:
    return rpc.Compare(result=EQUAL, target=VALUE, key=key, value=value)


def op_put(key: bytes, value: bytes, lease: int = 0) -> Any:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, lease=lease))


def op_delete(key: bytes) -> Any:
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key))


def op_delete_prefix(prefix: bytes) -> Any:
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=prefix, range_end=prefix_range_end(prefix)))


def op_delete_range(key: bytes, range_end: bytes) -> Any:
    """Delete every key in [``key``, ``range_end``)."""
    return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, range_end=range_end))


def op_get(key: bytes) -> Any:
    return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], *, timeout_s: float = CALL_TIMEOUT_S,
                 access: EtcdAccess | None = None) -> None:
        self.endpoints = list(endpoints)
        self._timeout = timeout_s
        self.access = access or EtcdAccess()
        self._token: _TokenPlugin | None = None
        self._target = grpc_target(self.endpoints)
        self._credentials: grpc.ChannelCredentials | None = None
        self._options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS
        if self.access.tls:
            # Several endpoints are dialled by address; their certificates name the first host.
            if len(self.endpoints) > 1:
                self._options = (*CHANNEL_OPTIONS,
                                 ("grpc.ssl_target_name_override", self.endpoints[0].rpartition(":")[0]))
            self._credentials = self.access.credentials()
            if self.access.user:
                self._token = _TokenPlugin(self._target, self.access, self._options)
                self._credentials = grpc.composite_channel_credentials(
                    self._credentials, grpc.metadata_call_credentials(self._token))
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False
        self.connections = 0  # channels made: 1, and one more per ``reconnect``
        self._connect()

    def _connect(self) -> None:
        self.connections += 1
        if self._credentials is None:
            self._channel = grpc.aio.insecure_channel(self._target, options=self._options)
        else:
            self._channel = grpc.aio.secure_channel(self._target, self._credentials, options=self._options)
        self._kv = rpc.KVStub(self._channel)
        self._lease = rpc.LeaseStub(self._channel)
        self._watch = rpc.WatchStub(self._channel)
        self._maintenance = rpc.MaintenanceStub(self._channel)

    def reconnect(self) -> None:
        """Continue on a new connection; calls in flight on the old one end as unavailable (a
        stream's write that never went out by the time limit its caller gives it), and a watch
        stream taken from it ends. After a network cut the old TCP connection can stay silent
        for seconds once the path is back (both ends' retransmission timers backed off while it
        was cut); a new one is answered at once. Called on the event loop; a closed client stays
        closed."""
        loop = asyncio.get_running_loop()
        if self._closed:
            return
        old = self._channel
        self._connect()
        task = loop.create_task(old.close(grace=None))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def note_failure(self, exc: BaseException) -> None:
        """After a failed call: an auth token etcd refused is fetched again by the next call."""
        if self._token is not None and _is_auth_error(exc):
            self._token.token = ""

    def _unavailable(self, what: str, exc: BaseException) -> CoordinatorUnavailableError:
        self.note_failure(exc)
        detail = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else repr(exc)
        return CoordinatorUnavailableError(f"etcd at {','.join(self.endpoints)}: {what} failed: {detail}")

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """Every failure of the call as ``CoordinatorUnavailableError``, including its end by
        ``reconnect`` (grpc raises ``CancelledError`` in the caller then); a cancellation of the
        caller's own task goes on as one."""
        try:
            yield
        except grpc.RpcError as exc:
            raise self._unavailable(what, exc) from exc
        except asyncio.CancelledError:
            if not replaced_call():
                raise
            raise CoordinatorUnavailableError(
                f"etcd at {','.join(self.endpoints)}: {what} ended: its connection was replaced") from None

    async def status(self, timeout_s: float | None = None) -> int:
        """The revision etcd is at (a cheap liveness probe)."""
        with self._calling("status"):
            resp = await self._maintenance.Status(rpc.StatusRequest(), timeout=timeout_s or self._timeout)
        return int(resp.header.revision)

    async def range_prefix(self, prefix: bytes) -> tuple[int, list[Any]]:
        """Every key under ``prefix`` at one revision (paged), and that revision."""
        return await self.range_between(prefix, prefix_range_end(prefix))

    async def range_between(self, key: bytes, end: bytes) -> tuple[int, list[Any]]:
        """Every key in [``key``, ``end``) at one revision (paged), and that revision."""
        revision, kvs = 0, []
        while True:
            with self._calling("range"):
                request = rpc.RangeRequest(key=key, range_end=end, limit=RANGE_PAGE, revision=revision)
                resp = await self._kv.Range(request, timeout=self._timeout)
            revision = revision or int(resp.header.revision)
            kvs.extend(resp.kvs)
            if not resp.more or not resp.kvs:
                return revision, kvs
            key = bytes(resp.kvs[-1].key) + b"\0"

    async def txn(self, compare: Sequence[Any], success: Sequence[Any], failure: Sequence[Any] = ()) -> Any:
        """One transaction; the response has ``succeeded``, ``header.revision``, ``responses``."""
        with self._calling("transaction"):
            return await self._kv.Txn(rpc.TxnRequest(compare=list(compare), success=list(success),
                                                     failure=list(failure)), timeout=self._timeout)

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease: (id, granted TTL in seconds)."""
        with self._calling("lease grant"):
            resp = await self._lease.LeaseGrant(rpc.LeaseGrantRequest(TTL=ttl_s), timeout=self._timeout)
        if resp.error:
            raise CoordinatorUnavailableError(f"etcd at {','.join(self.endpoints)}: lease grant: {resp.error}")
        return int(resp.ID), int(resp.TTL)

    async def keepalive(self, lease_id: int, timeout_s: float) -> int:
        """Refresh a lease once; its remaining TTL (<= 0: the lease is gone)."""
        call = self._lease.LeaseKeepAlive(timeout=timeout_s)
        try:
            with self._calling("keepalive"):
                # The gRPC deadline does not bound a write whose stream never opened (its channel
                # closed by ``reconnect`` meanwhile): the call's own limit does.
                async with asyncio.timeout(timeout_s):
                    await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                    resp = await call.read()
        except TimeoutError:
            raise CoordinatorUnavailableError(f"etcd at {','.join(self.endpoints)}: keepalive failed: "
                                              f"no answer within {timeout_s:g} s") from None
        finally:
            call.cancel()
        if resp is grpc.aio.EOF:
            raise CoordinatorUnavailableError(f"etcd at {','.join(self.endpoints)}: keepalive stream ended")
        return int(resp.TTL)

    async def revoke(self, lease_id: int, timeout_s: float | None = None) -> None:
        """Revoke a lease (its keys go at once); an unknown lease is already gone."""
        try:
            with self._calling("lease revoke"):
                await self._lease.LeaseRevoke(rpc.LeaseRevokeRequest(ID=lease_id), timeout=timeout_s or self._timeout)
        except CoordinatorUnavailableError as exc:
            cause = exc.__cause__
            if isinstance(cause, grpc.aio.AioRpcError) and cause.code() == grpc.StatusCode.NOT_FOUND:
                return
            raise

    def watch_stream(self) -> Any:
        """A bidirectional watch stream (write create/progress requests, read responses)."""
        return self._watch.Watch()

    @staticmethod
    def watch_create(prefix: bytes, start_revision: int) -> Any:
        return rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=prefix, range_end=prefix_range_end(prefix), start_revision=start_revision, progress_notify=True))

    @staticmethod
    def watch_progress() -> Any:
        return rpc.WatchRequest(progress_request=rpc.WatchProgressRequest())

    async def close(self) -> None:
        self._closed = True
        await self._channel.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
