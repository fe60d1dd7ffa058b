"""A node's etcd session: one lease carrying ``nodes/<id>`` (and the partitions it leads), kept
alive by our own loop (decision 0181).

Invariant: ``valid_until`` is the send time of the last answered keepalive + TTL - margin on the
monotonic clock, so a process that stalls (SIGSTOP, a hogged loop) stops proving its
leaderships before etcd can expire the lease. When it passes, or etcd says the lease is gone,
the session is lost: ``on_lost`` is called once, the client moves to a new connection (one that
carried the session through a network cut can stay silent for seconds after the cut heals), the
old lease is revoked as soon as etcd answers (its leader keys go at once), and a new lease is
granted and ``nodes/<id>`` registered again with a bounded backoff; ``on_reopened`` is called
once it is (the node may stand for leadership again: a partition only it can lead must not wait
for a change in etcd to be looked at). One task (the keepalive loop) changes the lease;
everything else reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from typing import Final, final

from coordinator.errors import CoordinatorError, CoordinatorUnavailableError
from coordinator.etcd_client import EtcdClient, cmp_create, op_get, op_put
from coordinator.etcd_keys import member_key, node_key
from coordinator.etcd_seal import RecordSeal
from coordinator.models import NodeInfo

log = logging.getLogger(__name__)

KEEPALIVE_CALL_TIMEOUT_S: Final = 5.0
MARGIN_MAX_S: Final = 1.0
SESSION_BACKOFF_MIN_S: Final = 0.1
SESSION_BACKOFF_MAX_S: Final = 0.5  # a session back soon after etcd is: ISRs wait for it
REGISTER_RETRY_S: Final = 0.25
REGISTER_GRACE_S: Final = 1.0  # beyond one TTL, for a crashed predecessor's lease to lapse
REVOKE_TIMEOUT_S: Final = 2.0


@final
class EtcdSession:
    def __init__(self, client: EtcdClient, prefix: str, node: NodeInfo, ttl_s: int, clock: Callable[[], float],
                 on_lost: Callable[[], None], seal: RecordSeal | None = None,
                 on_reopened: Callable[[], None] | None = None) -> None:
        self._client = client
        self._prefix = prefix
        self._node = node
        self._ttl_s = ttl_s
        self._granted_ttl_s = ttl_s
        self._clock = clock
        self._on_lost = on_lost
        self._on_reopened = on_reopened
        self._seal = seal or RecordSeal(None, prefix)
        self.lease: int | None = None
        self._valid_until = -math.inf
        self._expiry: asyncio.TimerHandle | None = None
        self._abandoned: set[int] = set()  # leases given up; revoked when etcd answers
        self._revokes: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def url(self) -> str:
        return ("etcds://" if self._client.access.tls else "etcd://") + ",".join(self._client.endpoints)

    def alive(self) -> bool:
        return self.lease is not None and self._clock() < self._valid_until

    def valid_until(self) -> float:
        return self._valid_until if self.lease is not None else -math.inf

    @property
    def _margin_s(self) -> float:
        return min(MARGIN_MAX_S, self._granted_ttl_s / 4)

    @property
    def _keepalive_timeout_s(self) -> float:
        """A late answer still extends the lease from its send time, so a keepalive may take as
        long as the lease can wait (a busy loop slows every step of the call)."""
        return min(KEEPALIVE_CALL_TIMEOUT_S, self._granted_ttl_s - self._margin_s)

    def _key(self, relative: str) -> bytes:
        return (self._prefix + relative).encode()

    async def open(self, *, first: bool) -> None:
        """Grant a lease and register ``nodes/<id>`` on it (and ``members/<id>``). A ``nodes/<id>``
        held by another live lease is another process with this id: on a first start it is waited
        for up to one TTL (a crashed predecessor's lease lapses), then refused."""
        node_id = self._node.node_id
        node = self._key(node_key(node_id).relative())
        value = self._seal.seal(node_key(node_id).relative(), self._node.to_json())
        member_value = self._seal.seal(member_key(node_id).relative(), self._node.to_json())
        deadline = self._clock() + self._ttl_s + REGISTER_GRACE_S
        while True:
            sent = self._clock()
            lease, ttl = await self._client.grant(self._ttl_s)
            try:
                resp = await self._client.txn(
                    [cmp_create(node, 0)],
                    [op_put(node, value, lease), op_put(self._key(member_key(node_id).relative()), member_value)],
                    [op_get(node)])
            except BaseException:
                await self._revoke_quietly(lease)
                raise
            if resp.succeeded:
                break
            await self._revoke_quietly(lease)
            kvs = resp.responses[0].response_range.kvs
            holder = int(kvs[0].lease) if kvs else 0
            if holder in self._abandoned:
                await self._client.revoke(holder)
                self._abandoned.discard(holder)
                continue
            if not first or self._clock() >= deadline:
                raise CoordinatorError(
                    f"node id {node_id} is already registered in etcd at {self.url} (cluster prefix "
                    f"{self._prefix}) by a live session (lease {holder:x}): another process runs with this id")
            await asyncio.sleep(REGISTER_RETRY_S)
        self.lease, self._granted_ttl_s = lease, ttl
        self._valid_until = -math.inf
        if self._clock() >= sent + ttl - self._margin_s:
            # Granting took longer than the lease can vouch for (a channel still reconnecting after
            # a network cut): one keepalive sent now proves it, rather than losing a live lease
            # at once and granting another after a backoff.
            sent = self._clock()
            try:
                ttl = await self._client.keepalive(lease, timeout_s=self._keepalive_timeout_s)
            except BaseException:
                self.lease = None
                await self._revoke_quietly(lease)
                raise
            if ttl <= 0:
                self.lease = None
                raise CoordinatorUnavailableError(f"lease {lease:x} expired in etcd while it was being registered")
        self._extend(sent + min(ttl, self._granted_ttl_s) - self._margin_s)
        log.info("etcd session open: node %d lease %x ttl %d s", node_id, lease, self._granted_ttl_s)
        if not first and self._on_reopened is not None:
            self._on_reopened()

    def start(self) -> None:
        """Start the keepalive loop (after a first ``open``)."""
        self._task = asyncio.create_task(self._keepalive_loop(), name=f"etcd-keepalive-{self._node.node_id}")

    async def close(self, *, revoke: bool, timeout_s: float) -> None:
        """Stop the loop; revoke the lease unless ``revoke`` is False (a crash-like exit)."""
        self._closed = True
        if self._expiry is not None:
            self._expiry.cancel()
        tasks = [t for t in (self._task, *self._revokes) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        lease, self.lease = self.lease, None
        self._valid_until = -math.inf
        if revoke and lease is not None:
            with contextlib.suppress(CoordinatorError):
                await self._client.revoke(lease, timeout_s=timeout_s)

    def _extend(self, valid_until: float) -> None:
        """Move ``valid_until`` on, and have the session declared lost the moment it passes
        without a further keepalive (not only when a slow keepalive call returns)."""
        if valid_until <= self._valid_until:
            return
        self._valid_until = valid_until
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = asyncio.get_running_loop().call_later(max(0.0, valid_until - self._clock()), self._expire)

    def _expire(self) -> None:
        self._expiry = None
        if self.lease is not None and self._clock() >= self._valid_until:
            self._lose(f"no keepalive answered within {self._granted_ttl_s} s - margin")
        elif self.lease is not None:
            self._expiry = asyncio.get_running_loop().call_later(self._valid_until - self._clock(), self._expire)

    def _lose(self, reason: str) -> None:
        if self.lease is None or self._closed:
            return
        log.warning("etcd session of node %d lost: %s", self._node.node_id, reason)
        old, self.lease = self.lease, None
        self._valid_until = -math.inf
        self._abandoned.add(old)
        self._client.reconnect()  # a cut may have left the old connection silent for seconds after it heals
        task = asyncio.create_task(self._revoke_quietly(old))
        self._revokes.add(task)
        task.add_done_callback(self._revokes.discard)
        self._on_lost()

    async def _revoke_quietly(self, lease: int) -> None:
        with contextlib.suppress(CoordinatorError):
            await self._client.revoke(lease, timeout_s=REVOKE_TIMEOUT_S)
            self._abandoned.discard(lease)

    async def _keepalive_loop(self) -> None:
        backoff = SESSION_BACKOFF_MIN_S
        while not self._closed:
            lease = self.lease
            if lease is None:
                try:
                    await self.open(first=False)
                    backoff = SESSION_BACKOFF_MIN_S
                except CoordinatorError as exc:
                    log.info("etcd session of node %d not re-created yet: %s", self._node.node_id, exc)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, SESSION_BACKOFF_MAX_S)
                continue
            sent = self._clock()
            try:
                remaining = await self._client.keepalive(lease, timeout_s=self._keepalive_timeout_s)
                if remaining <= 0:
                    self._lose(f"lease {lease:x} expired in etcd")
                    continue
                if self.lease == lease:
                    self._extend(sent + min(remaining, self._granted_ttl_s) - self._margin_s)
            except CoordinatorUnavailableError as exc:
                log.info("etcd keepalive of node %d failed: %s", self._node.node_id, exc)
            await asyncio.sleep(max(0.0, self._granted_ttl_s / 3 - (self._clock() - sent)))
