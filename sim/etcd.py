"""An in-memory etcd at the interface of ``coordinator.etcd_client.EtcdClient``, on the loop's time.

``SimEtcd`` is the store: keys with etcd's create/mod revision, version and lease; one revision per
write transaction; leases that expire on the loop's clock unless kept alive (their keys deleted at
one revision, as etcd does); watches from a start revision, replayed from a bounded history
(``HISTORY_MAX`` revisions; older is compacted, and a watch from before it is cancelled with
``compact_revision``, as etcd does); progress notifications queued behind the events already sent.
Messages are etcd's own protobuf ones (``aetcd.rpc``), so the coordinator reads them unchanged.

``SimEtcdClient`` is one node's client. Each call crosses a delay each way and is applied in
between; the faults it knows are etcd's own (``stop``/``start``: unavailable to everyone, the
calls refused at once) and a node cut from etcd (``isolate``/``rejoin``: calls time out after
their deadline; one cut after etcd applied it loses only the answer, so the outcome is unknown to
the caller, as on a real network). Every failure is a ``CoordinatorUnavailableError``, as the real
client's. Bounds: ``WATCH_QUEUE_MAX`` responses wait per watch (past it the watch is cancelled and
the client re-creates it from its revision); history ``HISTORY_MAX`` revisions.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any, Final

import grpc
from aetcd import rpc

from coordinator.errors import CoordinatorUnavailableError
from coordinator.etcd_client import CALL_TIMEOUT_S, CREATE, EQUAL, MOD, VALUE, VERSION, EtcdAccess, EtcdClient

ENDPOINT: Final = "etcd:2379"
HISTORY_MAX: Final = 10_000
WATCH_QUEUE_MAX: Final = 10_000
GREATER, LESS, NOT_EQUAL = 1, 2, 3  # etcd's CompareResult
LEASE: Final = 4  # etcd's CompareTarget LEASE
PUT, DELETE = 0, 1
FIRST_LEASE: Final = 0x7E57_0000


@dataclasses.dataclass(slots=True)
class _Record:
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    def kv(self, key: bytes) -> Any:
        return rpc.KeyValue(key=key, value=self.value, create_revision=self.create_revision,
                            mod_revision=self.mod_revision, version=self.version, lease=self.lease)


@dataclasses.dataclass(slots=True)
class _Lease:
    ttl_s: int
    expires_at: float
    keys: set[bytes]
    timer: asyncio.TimerHandle | None = None


def _in_range(key: bytes, start: bytes, end: bytes) -> bool:
    """etcd's range rule: ``end`` empty is the one key, ``b"\\0"`` is every key from ``start``."""
    if not end:
        return key == start
    return start <= key and (end == b"\0" or key < end)


def _compare(actual: Any, expected: Any, result: int) -> bool:
    if result == EQUAL:
        return bool(actual == expected)
    if result == NOT_EQUAL:
        return bool(actual != expected)
    if result == GREATER:
        return bool(actual > expected)
    if result == LESS:
        return bool(actual < expected)
    raise CoordinatorUnavailableError(f"unknown compare result {result}")


class SimEtcd:
    def __init__(self, rng: random.Random, *, delay_min_s: float = 0.0002, delay_max_s: float = 0.002,
                 trace: Callable[[str], None] | None = None, history_max: int = HISTORY_MAX) -> None:
        self._rng = rng
        self._delay = (delay_min_s, delay_max_s)
        self._trace = trace or (lambda event: None)
        self.revision = 1
        self._store: dict[bytes, _Record] = {}
        self._leases: dict[int, _Lease] = {}
        self._next_lease = FIRST_LEASE
        self._history: collections.deque[tuple[int, list[Any]]] = collections.deque(maxlen=history_max)
        self._watches: list[_Watch] = []
        self._clients: list[SimEtcdClient] = []
        self.up = True
        self._isolated: set[str] = set()

    # ---- faults ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """etcd is down: every call refused, every watch broken. Leases keep their deadline (a
        restarted etcd gives them a fresh TTL, as etcd's leader does on election)."""
        if self.up:
            self.up = False
            self._trace("etcd stop")
            for watch in list(self._watches):
                watch.broken("etcd stopped")

    def start(self) -> None:
        if not self.up:
            self.up = True
            self._trace("etcd start")
            now = self.loop.time()
            for lease_id in sorted(self._leases):
                self._schedule(lease_id, now + self._leases[lease_id].ttl_s)

    def isolate(self, host: str) -> None:
        """Cut ``host`` from etcd: its calls time out, its watches break."""
        if host not in self._isolated:
            self._isolated.add(host)
            self._trace(f"etcd isolate {host}")
            for watch in [w for w in self._watches if w.host == host]:
                watch.broken(f"{host} is cut from etcd")

    def rejoin(self, host: str) -> None:
        if host in self._isolated:
            self._isolated.discard(host)
            self._trace(f"etcd rejoin {host}")

    def crash(self, host: str) -> None:
        """``host``'s process dies: its clients stop (no revoke: its leases lapse after their TTL)
        and its watches end."""
        self._trace(f"etcd crash {host}")
        for client in [c for c in self._clients if c.host == host]:
            client.closed = True
        for watch in [w for w in self._watches if w.host == host]:
            watch.broken(f"{host} crashed")

    def reachable(self, host: str) -> bool:
        return self.up and host not in self._isolated

    def holds_lease(self, lease_id: int) -> bool:
        """etcd still keeps the lease (granted, not yet expired or revoked)."""
        return lease_id in self._leases

    def client(self, host: str, timeout_s: float = CALL_TIMEOUT_S) -> SimEtcdClient:
        return SimEtcdClient(self, host, timeout_s)

    def register(self, client: SimEtcdClient) -> None:
        self._clients = [c for c in self._clients if not c.closed]
        self._clients.append(client)

    # ---- the store ------------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def delay(self) -> float:
        return self._rng.uniform(*self._delay) if self._delay[1] > 0 else 0.0

    def header(self) -> Any:
        return rpc.ResponseHeader(revision=self.revision)

    def get(self, key: bytes) -> _Record | None:
        return self._store.get(key)

    def range(self, request: Any) -> Any:
        if request.revision and request.revision != self.revision:
            raise CoordinatorUnavailableError(f"a range at revision {request.revision}, not the current "
                                              f"{self.revision}: the simulated etcd keeps no old versions")
        keys = sorted(k for k in self._store if _in_range(k, bytes(request.key), bytes(request.range_end)))
        limited = keys[: request.limit] if request.limit else keys
        kvs = [rpc.KeyValue(key=k) if request.keys_only else self._store[k].kv(k) for k in limited]
        return rpc.RangeResponse(header=self.header(), kvs=kvs, more=len(limited) < len(keys), count=len(keys))

    def txn(self, request: Any) -> Any:
        succeeded = all(self._holds(c) for c in request.compare)
        ops = request.success if succeeded else request.failure
        puts = [bytes(op.request_put.key) for op in ops if op.WhichOneof("request") == "request_put"]
        if len(puts) != len(set(puts)):
            raise CoordinatorUnavailableError("etcdserver: duplicate key given in txn request")
        for op in ops:
            if op.WhichOneof("request") == "request_put" and op.request_put.lease and \
                    op.request_put.lease not in self._leases:
                raise CoordinatorUnavailableError("etcdserver: requested lease not found")
        events: list[Any] = []
        responses = []
        revision = self.revision + 1
        for op in ops:
            kind = op.WhichOneof("request")
            if kind == "request_range":
                responses.append(rpc.ResponseOp(response_range=self.range(op.request_range)))
            elif kind == "request_put":
                events.append(self._put(op.request_put, revision))
                responses.append(rpc.ResponseOp(response_put=rpc.PutResponse(header=self.header())))
            elif kind == "request_delete_range":
                deleted = self._delete(bytes(op.request_delete_range.key), bytes(op.request_delete_range.range_end),
                                       revision)
                events += deleted
                responses.append(rpc.ResponseOp(response_delete_range=rpc.DeleteRangeResponse(
                    header=self.header(), deleted=len(deleted))))
            else:
                raise CoordinatorUnavailableError(f"the simulated etcd does not do {kind} in a transaction")
        self._commit(revision, events)
        return rpc.TxnResponse(header=self.header(), succeeded=succeeded, responses=responses)

    def _holds(self, compare: Any) -> bool:
        if compare.range_end:
            raise CoordinatorUnavailableError("the simulated etcd compares one key, not a range")
        record = self._store.get(bytes(compare.key))
        target = compare.target
        if target == VALUE:
            return record is not None and _compare(record.value, bytes(compare.value), compare.result)
        actual, expected = {
            VERSION: (record.version if record else 0, compare.version),
            CREATE: (record.create_revision if record else 0, compare.create_revision),
            MOD: (record.mod_revision if record else 0, compare.mod_revision),
            LEASE: (record.lease if record else 0, compare.lease),
        }[target]
        return _compare(actual, expected, compare.result)

    def _put(self, put: Any, revision: int) -> Any:
        key = bytes(put.key)
        old = self._store.get(key)
        if old is not None and old.lease and old.lease in self._leases:
            self._leases[old.lease].keys.discard(key)
        record = _Record(bytes(put.value), old.create_revision if old else revision, revision,
                         old.version + 1 if old else 1, int(put.lease))
        self._store[key] = record
        if put.lease:
            self._leases[put.lease].keys.add(key)
        return rpc.Event(type=PUT, kv=record.kv(key))

    def _delete(self, start: bytes, end: bytes, revision: int) -> list[Any]:
        events = []
        for key in sorted(k for k in self._store if _in_range(k, start, end)):
            record = self._store.pop(key)
            if record.lease in self._leases:
                self._leases[record.lease].keys.discard(key)
            events.append(rpc.Event(type=DELETE, kv=rpc.KeyValue(key=key, mod_revision=revision)))
        return events

    def _commit(self, revision: int, events: list[Any]) -> None:
        if not events:
            return
        self.revision = revision
        self._history.append((revision, events))
        for watch in list(self._watches):
            watch.send_events(revision, events)

    # ---- leases ---------------------------------------------------------------------------------

    def grant(self, ttl_s: int) -> tuple[int, int]:
        lease_id = self._next_lease
        self._next_lease += 1
        self._leases[lease_id] = _Lease(ttl_s, 0.0, set())
        self._schedule(lease_id, self.loop.time() + ttl_s)
        self._trace(f"etcd grant {lease_id:x} ttl {ttl_s}")
        return lease_id, ttl_s

    def keepalive(self, lease_id: int) -> int:
        lease = self._leases.get(lease_id)
        if lease is None:
            return 0
        self._schedule(lease_id, self.loop.time() + lease.ttl_s)
        return lease.ttl_s

    def revoke(self, lease_id: int, why: str = "revoke") -> None:
        lease = self._leases.pop(lease_id, None)
        if lease is None:
            return
        if lease.timer is not None:
            lease.timer.cancel()
        self._trace(f"etcd {why} {lease_id:x}")
        revision = self.revision + 1
        events = []
        for key in sorted(lease.keys):
            events += self._delete(key, b"", revision)
        self._commit(revision, events)

    def _schedule(self, lease_id: int, expires_at: float) -> None:
        lease = self._leases[lease_id]
        if lease.timer is not None:
            lease.timer.cancel()
        lease.expires_at = expires_at
        lease.timer = self.loop.call_at(expires_at, self._expire, lease_id)

    def _expire(self, lease_id: int) -> None:
        lease = self._leases.get(lease_id)
        if lease is None:
            return
        lease.timer = None
        if not self.up:  # a stopped etcd expires nothing; it renews every lease when it starts
            return
        self.revoke(lease_id, "expire")

    # ---- watches --------------------------------------------------------------------------------

    def watch(self, watch: _Watch, request: Any) -> None:
        watch.start, watch.end = bytes(request.key), bytes(request.range_end)
        oldest = self._history[0][0] if self._history else self.revision + 1
        compacted = oldest - 1 if len(self._history) == self._history.maxlen else 0
        if request.start_revision and request.start_revision <= compacted:
            watch.push(rpc.WatchResponse(header=self.header(), compact_revision=compacted + 1, canceled=True))
            return
        self._watches.append(watch)
        watch.push(rpc.WatchResponse(header=self.header(), created=True))
        if request.start_revision:
            for revision, events in self._history:
                if revision >= request.start_revision:
                    watch.send_events(revision, events)

    def progress(self, watch: _Watch) -> None:
        if watch in self._watches:
            watch.push(rpc.WatchResponse(header=self.header()))

    def unwatch(self, watch: _Watch) -> None:
        if watch in self._watches:
            self._watches.remove(watch)


class _Watch:
    """One watch stream (``call`` in the coordinator's feed): ``write``, ``read``, ``cancel``."""

    def __init__(self, client: SimEtcdClient) -> None:
        self._client = client
        self.host = client.host
        self.start, self.end = b"", b""
        self._queue: collections.deque[tuple[float, Any]] = collections.deque()
        self._last_due = 0.0
        self._arrived = asyncio.Event()
        self._error: str | None = None
        self._cancelled = False
        self._replaced = False

    async def write(self, request: Any) -> None:
        etcd = self._client.etcd
        await self._client.travel("watch")
        if self._replaced:
            raise asyncio.CancelledError  # its connection went while the request travelled
        kind = request.WhichOneof("request_union")
        if kind == "create_request":
            etcd.watch(self, request.create_request)
        elif kind == "progress_request":
            etcd.progress(self)

    async def read(self) -> Any:
        while not self._queue and self._error is None and not self._cancelled and not self._replaced:
            self._arrived.clear()
            await self._arrived.wait()
        if self._replaced:
            raise asyncio.CancelledError  # as grpc ends a call whose channel closed
        if self._error is not None:
            raise CoordinatorUnavailableError(f"etcd at {ENDPOINT}: watch failed: {self._error}")
        if self._cancelled:
            return grpc.aio.EOF
        due, response = self._queue.popleft()
        await asyncio.sleep(max(0.0, due - asyncio.get_running_loop().time()))
        return response

    def replaced(self) -> None:
        """Its client moved to a new connection: the stream ends, the next read raises."""
        self._replaced = True
        self._client.etcd.unwatch(self)
        self._arrived.set()

    def cancel(self) -> bool:
        self._cancelled = True
        self._client.forget(self)
        self._client.etcd.unwatch(self)
        self._arrived.set()
        return True

    def push(self, response: Any) -> None:
        if self._cancelled or self._error is not None:
            return
        if len(self._queue) >= WATCH_QUEUE_MAX:
            self.broken(f"more than {WATCH_QUEUE_MAX} responses wait unread")
            return
        due = max(asyncio.get_running_loop().time() + self._client.etcd.delay(), self._last_due)
        self._last_due = due
        self._queue.append((due, response))
        self._arrived.set()

    def send_events(self, revision: int, events: list[Any]) -> None:
        mine = [e for e in events if _in_range(bytes(e.kv.key), self.start, self.end)]
        if mine:
            self.push(rpc.WatchResponse(header=rpc.ResponseHeader(revision=revision), events=mine))

    def broken(self, reason: str) -> None:
        self._error = reason
        self._queue.clear()
        self._client.etcd.unwatch(self)
        self._arrived.set()


class SimEtcdClient(EtcdClient):
    """One node's client of ``SimEtcd`` (the real client's methods, no gRPC channel)."""

    def __init__(self, etcd: SimEtcd, host: str, timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.etcd = etcd
        self.host = host
        self.endpoints = [ENDPOINT]
        self._timeout = timeout_s
        self.access = EtcdAccess()
        self._token = None
        self.closed = False
        self.connections = 1
        self._streams: list[_Watch] = []  # the watch streams taken on this connection
        etcd.register(self)

    @classmethod
    def factory(cls, etcd: SimEtcd, host: str) -> Callable[[Sequence[str], EtcdAccess], EtcdClient]:
        """What ``EtcdCoordinator(client_factory=...)`` takes: this host's client of ``etcd``."""
        return lambda endpoints, access: cls(etcd, host)

    def note_failure(self, exc: BaseException) -> None:
        pass

    def reconnect(self) -> None:
        """As the real client's: this client's watch streams end as a cancelled gRPC call does
        (its feed watches again at once) and its calls in flight end unavailable."""
        self.connections += 1
        for watch in self._streams:
            watch.replaced()
        self._streams.clear()

    async def travel(self, what: str, timeout_s: float | None = None) -> None:
        """A request's way to etcd (refused when etcd is down, timed out when cut)."""
        timeout = timeout_s or self._timeout
        if self.closed:
            raise CoordinatorUnavailableError(f"etcd at {ENDPOINT}: {what} failed: the client is closed")
        if not self.etcd.up:
            await asyncio.sleep(self.etcd.delay())
            raise CoordinatorUnavailableError(f"etcd at {ENDPOINT}: {what} failed: connection refused")
        await asyncio.sleep(self.etcd.delay())
        if not self.etcd.reachable(self.host):
            await asyncio.sleep(timeout)
            raise CoordinatorUnavailableError(f"etcd at {ENDPOINT}: {what} failed: deadline exceeded")

    async def _call(self, what: str, apply: Callable[[], Any], timeout_s: float | None = None) -> Any:
        started = asyncio.get_running_loop().time()
        timeout = timeout_s or self._timeout
        connection = self.connections
        await self.travel(what, timeout)
        self._check_connection(what, connection)
        result = apply()
        await asyncio.sleep(self.etcd.delay())
        self._check_connection(what, connection)  # applied; the answer is lost with its connection
        if not self.etcd.reachable(self.host):  # applied; the answer is lost
            await asyncio.sleep(max(0.0, started + timeout - asyncio.get_running_loop().time()))
            raise CoordinatorUnavailableError(f"etcd at {ENDPOINT}: {what} failed: deadline exceeded")
        return result

    def forget(self, watch: _Watch) -> None:
        if watch in self._streams:
            self._streams.remove(watch)

    def _check_connection(self, what: str, connection: int) -> None:
        if self.connections != connection:
            raise CoordinatorUnavailableError(f"etcd at {ENDPOINT}: {what} ended: its connection was replaced")

    async def status(self, timeout_s: float | None = None) -> int:
        return int(await self._call("status", lambda: self.etcd.revision, timeout_s))

    async def range_between(self, key: bytes, end: bytes) -> tuple[int, list[Any]]:
        resp = await self._call("range", lambda: self.etcd.range(rpc.RangeRequest(key=key, range_end=end)))
        return int(resp.header.revision), list(resp.kvs)

    async def txn(self, compare: Sequence[Any], success: Sequence[Any], failure: Sequence[Any] = ()) -> Any:
        request = rpc.TxnRequest(compare=list(compare), success=list(success), failure=list(failure))
        return await self._call("transaction", lambda: self.etcd.txn(request))

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        result: tuple[int, int] = await self._call("lease grant", lambda: self.etcd.grant(ttl_s))
        return result

    async def keepalive(self, lease_id: int, timeout_s: float) -> int:
        return int(await self._call("keepalive", lambda: self.etcd.keepalive(lease_id), timeout_s))

    async def revoke(self, lease_id: int, timeout_s: float | None = None) -> None:
        await self._call("lease revoke", lambda: self.etcd.revoke(lease_id), timeout_s)

    def watch_stream(self) -> Any:
        watch = _Watch(self)
        self._streams.append(watch)
        return watch

    async def close(self) -> None:
        self.closed = True
