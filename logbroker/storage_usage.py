"""A node's storage ledger kept current, and the storage quota checked at produce (decision 0241).

Every ``RECOUNT_S`` the node recounts the bytes of the partitions it leads per payer (the sizes
its logs keep in memory: no directory walk, no I/O) and, on a cluster, every ``PEERS_POLL_S``
asks each live peer for its own sums (``StorageByPayer`` over internal RPC, one bounded call per
peer with a ``PEER_DEADLINE_S`` deadline). Appends between recounts are added as they happen
(``appended``), so a user's own writes count at once on the node that leads their partitions.

The check runs where a produce enters (HTTP JSON/msgpack/prebuilt batch, queue send, gRPC
Publish all reach ``WritePath.produce_records`` or ``WritePath.produce_batch``), before anything is
stored or forwarded: the entry node knows the payer's cluster-wide sum, as stale as the last
answers (at most ``PEERS_POLL_S`` plus the deadline, normally; a peer's last answer is used for at
most ``PEER_STALE_S``). A forwarded batch is not checked again on the leader. Dead letters moved
by a queue are not checked: they are the queue owner's bytes already admitted.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from internal_rpc.messages import StorageByPayerAnswer, StorageByPayerRequest
from logbroker.errors import ANY_ERROR
from logbroker.ownership import INTERNAL_PREFIX, payer_by_topic
from logbroker.storage_quota import StorageLedger, check_storage

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.auth.service import AuthService
    from logbroker.ports import LocalReplicas, PeerTransport

RECOUNT_S: Final = 2.0
PEERS_POLL_S: Final = 2.0
LIMITS_CACHED_MAX: Final = 100_000  # users whose resolved storage limit is kept (dropped all at once past it)
PEER_DEADLINE_S: Final = 2.0
PEER_STALE_S: Final = 15.0


class StorageUsage:
    def __init__(self, coordinator: Coordinator, auth: AuthService, replicas: LocalReplicas, peers: PeerTransport,
                 node_id: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        """``auth``: the node's, whose default limits are read at each use (the node resolves
        them again when it starts)."""
        self._coordinator = coordinator
        self._auth = auth
        self._replicas = replicas
        self._peers = peers
        self._me = node_id
        self._clock = clock
        self.ledger = StorageLedger(peer_stale_s=PEER_STALE_S)
        self._polled_s = -math.inf
        # user -> (their record, the node's limits, the limit they resolve to): valid while both are the same objects
        self._limits: dict[str, tuple[object, object, int]] = {}

    def payer_of(self, topic: str) -> str | None:
        """Who pays for what is written to ``topic`` (its owner; None for internal and ownerless topics)."""
        meta = self._coordinator.cached_topic(topic)
        if meta is None or meta.owner is None or topic.startswith(INTERNAL_PREFIX):
            return None
        return meta.owner

    async def limited(self, topic: str) -> tuple[str, int] | None:
        """The payer of ``topic`` and their ``storage_bytes_max`` when writes to it are limited;
        None for admins' topics, ownerless ones, and on a node with auth off."""
        payer = self.payer_of(topic) if self._auth.enabled else None
        if payer is None:
            return None
        limit = await self.limit_of(payer)
        return (payer, limit) if limit else None

    def check(self, topic: str, limited: tuple[str, int], incoming_bytes: int) -> None:
        """Refuse (``StorageQuotaExceededError``) a write of ``incoming_bytes`` to ``topic`` that
        would take its payer past their limit (``limited``, as ``limited`` gave it)."""
        payer, limit = limited
        if incoming_bytes:
            check_storage(payer, topic, limit, self.ledger.used(payer, self._clock()), incoming_bytes)

    async def limit_of(self, user: str) -> int:
        """``user``'s ``storage_bytes_max`` (0: unlimited, as for admins). Resolved once per stored
        user record (records are immutable: a change of role or quotas is a new one)."""
        defaults = self._auth.limits
        record = await self._coordinator.find_user(user)
        cached = self._limits.get(user)
        if cached is not None and cached[0] is record and cached[1] is defaults:
            return cached[2]
        if record is not None and record.role == "admin":
            limit = 0
        else:
            limit = (defaults.override(record.quotas) if record is not None and record.quotas else defaults
                     ).storage_bytes_max
        if len(self._limits) >= LIMITS_CACHED_MAX:
            self._limits.clear()
        self._limits[user] = (record, defaults, limit)
        return limit

    async def describe(self, user: str) -> dict[str, int]:
        """What ``GET /v1/users/{name}`` shows: the bytes ``user`` stores and their limit (0: none)."""
        return {"used_bytes": self.ledger.used(user, self._clock()), "limit_bytes": await self.limit_of(user)}

    def appended(self, topic: str, size_bytes: int) -> None:
        payer = self.payer_of(topic)
        if payer is not None:
            self.ledger.appended(payer, size_bytes)

    async def tick(self) -> None:
        """One round: recount this node's led partitions; on a cluster, ask the peers when due."""
        topics = await self._coordinator.list_topics()
        self.recount(payer_by_topic(topics))
        now = self._clock()
        if self._coordinator.is_cluster and now - self._polled_s >= PEERS_POLL_S:
            self._polled_s = now
            await self._poll_peers()
        self.ledger.forget(self._clock())

    def recount(self, payers: dict[str, str]) -> None:
        """Sum the led partitions' sizes per payer (no await: appends cannot slip in between)."""
        sums: dict[str, int] = {}
        clustered, me = self._coordinator.is_cluster, self._me
        cached_partition = self._coordinator.cached_partition
        for replica in self._replicas.all():
            payer = payers.get(replica.topic)
            if payer is None:
                continue
            if clustered:
                state = cached_partition(replica.topic, replica.partition)
                if state is None or state.leader != me:
                    continue
            sums[payer] = sums.get(payer, 0) + replica.log.size_bytes
        self.ledger.recounted(sums)

    async def _poll_peers(self) -> None:
        me = self._me
        others = [n.node_id for n in await self._coordinator.nodes() if n.node_id != me]

        async def ask(node_id: int) -> None:
            try:
                answer = await self._peers.peer_call(node_id, StorageByPayerRequest(), deadline_s=PEER_DEADLINE_S)
            except ANY_ERROR:
                return  # its last answer stands until it is stale
            self.ledger.heard(node_id, answer.payers, self._clock())

        await asyncio.gather(*(ask(node_id) for node_id in others))

    def answer(self) -> StorageByPayerAnswer:
        """This node's answer to a peer's ``StorageByPayer``."""
        return StorageByPayerAnswer(payers=self.ledger.local_sums())
