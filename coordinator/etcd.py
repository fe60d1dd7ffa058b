"""The etcd coordinator: membership by session lease, metadata in etcd (DESIGN §5), a watch-fed
cache for every read, and transactions for every write.

Composition: ``EtcdSession`` (``etcd_session.py``) keeps this node's lease and fencing deadline;
``MetadataFeed`` (``etcd_feed.py``) loads and watches the prefix into a ``MetadataCache``
(``cache.py``); ``EtcdClient`` (``etcd_client.py``) bounds every call; ``GuardedWrites``
(``etcd_writes.py``) makes each write a transaction this node reads back; ``EtcdAccounts``
(``etcd_accounts.py``) writes users, ACLs and group records; ``EtcdUsage`` (``etcd_usage.py``)
the usage records. This module turns the other ``Coordinator`` calls into guarded transactions
over the key layout of ``etcd_keys.py``.

Writes: guarded transactions (create-if-absent, update-if-unchanged by mod revision); a write
returns once the cache has applied its revision, so this node reads its own writes. A guard that
fails because something else changed meanwhile is re-read and retried a bounded number of times.
Topic writes that exceed etcd's 128 operations per transaction hold a leased ``locks/<topic>``
key, write the partitions in chunks, and put the ``topics/`` key last (decision 0182).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, final

from coordinator.base import Coordinator
from coordinator.cache import MetadataCache
from coordinator.eligibility import check_elr, elected, withdrawn
from coordinator.errors import (
    CoordinatorError,
    CoordinatorUnavailableError,
    InvalidTopicError,
    StaleEpochError,
    TopicExistsError,
    UnknownTopicError,
)
from coordinator.etcd_accounts import EtcdAccounts
from coordinator.etcd_client import (
    TLS_URL_SCHEME,
    URL_SCHEME,
    EtcdAccess,
    EtcdClient,
    cmp_create,
    cmp_mod,
    cmp_value,
    op_delete,
    op_delete_prefix,
    op_put,
    parse_etcd_url,
)
from coordinator.etcd_feed import MetadataFeed
from coordinator.etcd_keys import (
    LeaderRecord,
    PartitionRecord,
    acl_key,
    cluster_prefix,
    decode,
    encode,
    leader_key,
    lock_key,
    node_key,
    parse_key,
    partition_key,
    topic_key,
)
from coordinator.etcd_seal import SEAL_FIELD, RecordSeal
from coordinator.etcd_session import EtcdSession
from coordinator.etcd_usage import EtcdUsage
from coordinator.etcd_witness import KIND as WITNESS_KIND
from coordinator.etcd_witness import bear_witness, end_session, parse_witness
from coordinator.etcd_writes import CONTENTION_RETRIES, TXN_OPS_MAX, GuardedWrites
from coordinator.leader_racks import leader_racks
from coordinator.models import (
    ClusterNode,
    MetadataChange,
    NodeInfo,
    NodeSession,
    PartitionState,
    TopicMetadata,
    TopicSpec,
    check_partition_growth,
)
from coordinator.placement import PlacementNode, place_partitions
from coordinator.users import Acl, GroupRecord, UserRecord

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S: Final = 5.0
CONNECT_RETRY_S: Final = 0.2
STATUS_TIMEOUT_S: Final = 1.0
CLOSE_TIMEOUT_S: Final = 2.0
EXCLUSIVE_PREFIX: Final = "~"  # cluster-wide locks: no topic name starts with it
DEFAULT_REPLICATION_FACTOR: Final = 2
ClientFactory = Callable[[Sequence[str], EtcdAccess], EtcdClient]


def grpc_client(endpoints: Sequence[str], access: EtcdAccess) -> EtcdClient:
    return EtcdClient(endpoints, access=access)


@final
class EtcdCoordinator(Coordinator):
    def __init__(self, endpoints: Sequence[str], cluster: str, node: NodeInfo, lease_ttl_ms: int, *,
                 clock: Callable[[], float] = time.monotonic, access: EtcdAccess | None = None,
                 seal_secret: str | None = None, adopt_unsealed: bool = False,
                 client_factory: ClientFactory = grpc_client) -> None:
        """``access``: TLS and etcd user (default: plaintext, no user); ``client_factory``: makes
        the client at ``start`` (the simulation gives an in-memory etcd's); ``seal_secret``: the
        cluster's shared secret the access-granting records are sealed with (``etcd_seal``; None:
        nothing sealed or checked, development only); ``adopt_unsealed``: seal, once at start,
        the records stored before seals existed (the operator vouches for etcd's contents)."""
        self._adopt_unsealed = adopt_unsealed
        self._client_factory = client_factory
        self._endpoints = list(endpoints)
        self._prefix = cluster_prefix(cluster)
        self._node = node
        self._ttl_s = max(1, math.ceil(lease_ttl_ms / 1000))
        self._clock = clock
        self._access = access or EtcdAccess()
        self._seal = RecordSeal(seal_secret, self._prefix)
        self._cache = MetadataCache(self._seal)
        self._client: EtcdClient | None = None
        self._session: EtcdSession | None = None
        self._feed: MetadataFeed | None = None
        self._listeners: list[Callable[[MetadataChange], None]] = []
        self._witness_listeners: list[Callable[[int], None]] = []
        self._closed = False
        self._w = GuardedWrites(self._prefix, self._seal, self._cache, lambda: self._etcd, lambda: self._feed)
        self._accounts = EtcdAccounts(self._w)
        self._usage = EtcdUsage(cluster, seal_secret, lambda: self._etcd)

    @classmethod
    def from_url(cls, url: str, cluster: str, node: NodeInfo, lease_ttl_ms: int, *,
                 access: EtcdAccess | None = None, seal_secret: str | None = None,
                 adopt_unsealed: bool = False) -> EtcdCoordinator:
        """From a ``--coordinator`` value such as ``etcds://127.0.0.1:2379,127.0.0.1:22379``."""
        return cls(parse_etcd_url(url), cluster, node, lease_ttl_ms, access=access, seal_secret=seal_secret,
                   adopt_unsealed=adopt_unsealed)

    @property
    def rejected_records(self) -> int:
        """Records ignored because their seal did not verify (since start)."""
        return self._cache.rejected_records

    # ---- keys ----------------------------------------------------------------------------------

    def _kp(self, kind: str, name: str) -> bytes:
        """The prefix of a two-part key family of one topic (``partitions/<t>/``)."""
        return f"{self._prefix}{kind}/{name}/".encode()

    @property
    def _etcd(self) -> EtcdClient:
        if self._client is None or self._closed:
            raise CoordinatorUnavailableError("the etcd coordinator is not started (or closed)")
        return self._client

    @property
    def _url(self) -> str:
        return (TLS_URL_SCHEME if self._access.tls else URL_SCHEME) + ",".join(self._endpoints)

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node.node_id

    @property
    def is_cluster(self) -> bool:
        return True

    async def start(self) -> None:
        """Connect (bounded: ``CoordinatorUnavailableError`` naming the URL when etcd does not
        answer within ``CONNECT_TIMEOUT_S``), register this node on a new lease, load the cache
        and start the watch and keepalive loops."""
        client = self._client = self._client_factory(self._endpoints, self._access)
        name = f"node {self.node_id}"
        self._feed = MetadataFeed(client, self._prefix, self._cache, self._clock, name)
        for listener in self._listeners:
            self._feed.on_change(listener)
        self._feed.on_put(WITNESS_KIND + "/", self._witnessed)
        self._session = EtcdSession(client, self._prefix, self._node, self._ttl_s, self._clock,
                                    lambda: self._notify(MetadataChange(session_lost=True)), self._seal,
                                    on_reopened=lambda: self._notify(MetadataChange(nodes=True)))
        try:
            await self._connect()
            await self._session.open(first=True)
            await self._feed.start()
            self._session.start()
            if self._adopt_unsealed and self._seal.enabled:
                await self._adopt()
            self._check_no_legacy_topics()
        except BaseException:
            await self.close()
            raise

    def _check_no_legacy_topics(self) -> None:
        """Refuse to start over topics stored without a seal (a cluster from before seals): they
        would read as absent, and a node removes the data of partitions it does not know."""
        legacy = sorted(k for k in self._cache.unsealed if k.startswith("topics/"))
        if legacy:
            raise CoordinatorError(
                f"etcd holds {len(legacy)} topic record(s) without a seal ({', '.join(legacy[:5])}): stored before "
                "records were sealed, or written by something without the cluster's key. If they are the "
                "cluster's own, start one node once with --etcd-adopt-unsealed true to seal them (decision 0225)")

    async def _adopt(self) -> None:
        """Seal every record of a sealed kind that carries no seal yet (each put guarded by the
        mod revision it was read at, on the lease it was on)."""
        _, kvs = await self._etcd.range_prefix(self._prefix.encode())
        adopted = 0
        for kv in kvs:
            key = bytes(kv.key)
            relative = key.decode()[len(self._prefix):]
            if parse_key(relative) is None or not RecordSeal.sealed(relative):
                continue
            try:
                value = decode(bytes(kv.value))
            except ValueError:
                continue
            if SEAL_FIELD in value:
                continue
            resp = await self._w.txn([cmp_mod(key, int(kv.mod_revision))],
                                   [op_put(key, self._seal.seal(relative, value), int(kv.lease))])
            adopted += bool(resp.succeeded)
        log.warning("sealed %d record(s) stored in etcd without a seal (adopt_unsealed)", adopted)

    async def _connect(self) -> None:
        deadline = self._clock() + CONNECT_TIMEOUT_S
        while True:
            try:
                await self._etcd.status(timeout_s=STATUS_TIMEOUT_S)
                return
            except CoordinatorUnavailableError as exc:
                if self._clock() >= deadline:
                    raise CoordinatorUnavailableError(
                        f"cannot reach etcd at {self._url} (tried for {CONNECT_TIMEOUT_S:g} s): {exc}") from exc
            await asyncio.sleep(CONNECT_RETRY_S)

    async def close(self, *, revoke: bool = True) -> None:
        """Stop the loops, revoke the lease (others see this node dead at once) and close the
        client. ``revoke=False`` leaves like a crash does: the lease lapses after its TTL."""
        if self._closed:
            return
        self._closed = True
        if self._feed is not None:
            await self._feed.close(CLOSE_TIMEOUT_S)
        if self._session is not None:
            await self._session.close(revoke=revoke, timeout_s=CLOSE_TIMEOUT_S)
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # ---- session and cache ---------------------------------------------------------------------

    def session_alive(self) -> bool:
        return self._session is not None and not self._closed and self._session.alive()

    def lease_valid_until(self) -> float:
        return self._session.valid_until() if self._session is not None and not self._closed else -math.inf

    def _live_lease(self) -> int:
        """This node's lease, when its session is live (else ``CoordinatorUnavailableError``)."""
        lease = self._session.lease if self._session is not None else None
        if lease is None or not self.session_alive():
            raise CoordinatorUnavailableError(f"node {self.node_id}'s etcd session is not live; retry")
        return lease

    def on_change(self, listener: Callable[[MetadataChange], None]) -> None:
        self._listeners.append(listener)
        if self._feed is not None:
            self._feed.on_change(listener)

    def _notify(self, change: MetadataChange) -> None:
        if self._feed is not None:
            self._feed.notify(change)

    # ---- topics --------------------------------------------------------------------------------

    def _placement_nodes(self) -> list[PlacementNode]:
        nodes = self._cache.nodes()
        if not nodes:
            raise CoordinatorUnavailableError("no live node is registered in etcd")
        return [PlacementNode(n.node_id, n.rack) for n in nodes]

    async def create_topic(self, spec: TopicSpec, owner: str | None, *, on_node: int | None = None,
                           replicas: tuple[int, ...] | None = None) -> TopicMetadata:
        """Create a topic with its partitions placed over the live nodes (``on_node``: every
        partition with one replica list, that live node first; ``replicas``: every partition on
        exactly those live nodes). ``replication_factor`` None means min(2, live nodes); more than
        the live nodes is ``InvalidTopicError``. New partitions have every replica in the ISR
        (their logs are all empty), epoch 0 and no leader."""
        if self._cache.topic(spec.name) is not None:
            raise TopicExistsError(f"{spec.name!r} already exists")
        nodes = self._placement_nodes()
        live = {n.node_id for n in nodes}
        if replicas is not None:
            if not replicas or len(set(replicas)) != len(replicas) or not set(replicas) <= live:
                raise InvalidTopicError(f"replicas {list(replicas)} must be distinct live nodes")
            spec = dataclasses.replace(spec, replication_factor=len(replicas))
        replication = spec.replication_factor or min(DEFAULT_REPLICATION_FACTOR, len(nodes))
        if replication > len(nodes):
            raise InvalidTopicError(f"replication factor {replication} exceeds the {len(nodes)} live node(s)")
        if on_node is not None:
            if on_node not in live:
                raise InvalidTopicError(f"node {on_node} is not alive")
            others = [n for n in place_partitions(1, replication, nodes, current=self._cache.assignment())[0]
                      if n != on_node]
            replicas = (on_node, *others[:replication - 1])
        if replicas is not None:
            placed = [replicas] * spec.partitions
        else:
            placed = place_partitions(spec.partitions, replication, nodes, current=self._cache.assignment(),
                                      leader_racks=leader_racks(spec.config))
        meta = TopicMetadata(spec.name, uuid.uuid4().hex, spec.partitions, replication, spec.kind,
                             dict(spec.config), owner, time.time_ns() // 1_000_000)
        records = [(p, PartitionRecord(meta.topic_id, r, r, 0)) for p, r in enumerate(placed)]
        if not await self._write_topic(meta, records, cmp_create(self._w.key(topic_key(spec.name)), 0), creating=True):
            raise TopicExistsError(f"{spec.name!r} already exists")
        return meta

    async def add_partitions(self, name: str, partitions: int) -> TopicMetadata:
        for _ in range(CONTENTION_RETRIES):
            meta = self._w.topic(name)
            count = check_partition_growth(meta, partitions)
            placed = place_partitions(count - meta.partitions, meta.replication_factor, self._placement_nodes(),
                                      first_partition=meta.partitions, current=self._cache.assignment(),
                                      leader_racks=leader_racks(meta.config))
            grown = TopicMetadata(meta.name, meta.topic_id, count, meta.replication_factor, meta.kind,
                                  meta.config, meta.owner, meta.created_ms)
            records = [(meta.partitions + i, PartitionRecord(meta.topic_id, r, r, 0)) for i, r in enumerate(placed)]
            guard = cmp_mod(self._w.key(topic_key(name)), self._cache.mod_revision(topic_key(name)))
            if await self._write_topic(grown, records, guard, creating=False):
                return grown
        raise self._w.contended(f"adding partitions to {name!r}")

    async def set_topic_config(self, name: str,
                               update: Callable[[TopicMetadata], Mapping[str, Any]]) -> TopicMetadata:
        """One put of ``topics/<name>`` (sealed like every topic record), guarded by its mod
        revision: the watch carries it to every node, which applies it to what it hosts."""
        for _ in range(CONTENTION_RETRIES):
            meta = self._w.topic(name)
            changed = dataclasses.replace(meta, config=dict(update(meta)))
            tkey = topic_key(name)
            resp = await self._w.txn([cmp_mod(self._w.key(tkey), self._cache.mod_revision(tkey))],
                                   [op_put(self._w.key(tkey), self._w.sealed(tkey, changed.to_json()))])
            if resp.succeeded:
                return changed
        raise self._w.contended(f"changing the config of {name!r}")

    async def _write_topic(self, meta: TopicMetadata, records: list[tuple[int, PartitionRecord]], guard: Any, *,
                           creating: bool) -> bool:
        """Put ``records`` then ``topics/<name>`` if ``guard`` holds; False when it does not.
        Small writes are one transaction; large ones hold ``locks/<name>`` on this node's lease
        and write chunks, the topic key last, so no reader sees a topic before its partitions."""
        name = meta.name
        topic, lock = self._w.key(topic_key(name)), self._w.key(lock_key(name))
        puts = [op_put(self._w.key(partition_key(name, p)), r.encode()) for p, r in records]
        put_topic = op_put(topic, self._w.sealed(topic_key(name), meta.to_json()))
        if len(puts) + 1 <= TXN_OPS_MAX:
            resp = await self._w.txn([guard, cmp_create(lock, 0)], [*puts, put_topic])
            if not resp.succeeded and self._cache.entry(lock_key(name)) is not None:
                raise CoordinatorUnavailableError(f"another node is writing topic {name!r}; retry")
            return bool(resp.succeeded)
        lease = self._live_lease()
        token = encode({"node": self.node_id, "token": uuid.uuid4().hex})
        clear = [op_delete_prefix(self._kp("partitions", name))] if creating else []
        resp = await self._w.txn([guard, cmp_create(lock, 0)], [op_put(lock, token, lease), *clear])
        if not resp.succeeded:
            if self._cache.entry(lock_key(name)) is not None:
                raise CoordinatorUnavailableError(f"another node is writing topic {name!r}; retry")
            return False
        try:
            for i in range(0, len(puts), TXN_OPS_MAX):
                resp = await self._w.txn([cmp_value(lock, token)], puts[i:i + TXN_OPS_MAX])
                if not resp.succeeded:
                    raise CoordinatorUnavailableError(f"lost the write lock of topic {name!r}; retry")
            resp = await self._w.txn([cmp_value(lock, token), guard], [put_topic, op_delete(lock)])
            return bool(resp.succeeded)
        finally:
            with contextlib.suppress(CoordinatorError):
                await self._etcd.txn([cmp_value(lock, token)], [op_delete(lock)])

    async def delete_topic(self, name: str) -> TopicMetadata:
        for _ in range(CONTENTION_RETRIES):
            meta = self._w.topic(name)
            key = topic_key(name)
            resp = await self._w.txn([cmp_mod(self._w.key(key), self._cache.mod_revision(key))],
                                   [op_delete(self._w.key(key)), op_delete_prefix(self._kp("partitions", name)),
                                    op_delete_prefix(self._kp("leaders", name)), op_delete(self._w.key(acl_key(name)))])
            if resp.succeeded:
                return meta
        raise self._w.contended(f"deleting {name!r}")

    async def get_topic(self, name: str) -> TopicMetadata:
        return self._w.topic(name)

    async def list_topics(self) -> list[TopicMetadata]:
        return self._cache.topics()

    async def partition_states(self, topic: str) -> list[PartitionState]:
        states = self._cache.partitions(topic)
        if states is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return states

    async def nodes(self) -> list[NodeInfo]:
        return self._cache.nodes()

    async def cluster_nodes(self) -> list[ClusterNode]:
        live = {n.node_id for n in self._cache.nodes()}
        members = self._cache.members()
        return [ClusterNode(members[i], i in live) for i in sorted(members)]

    def advertise(self, node: NodeInfo) -> None:
        self._node = node

    def cached_topic(self, name: str) -> TopicMetadata | None:
        return self._cache.topic(name)

    def cached_topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        return self._cache.topic_by_id(topic_id)

    def cached_leaderless_partitions(self) -> int:
        return self._cache.leaderless_partitions()

    def cached_partition(self, topic: str, partition: int) -> PartitionState | None:
        return self._cache.partition(topic, partition)

    def cached_node(self, node_id: int) -> NodeInfo | None:
        return self._cache.node(node_id)

    # ---- crash witnesses (decision 0260) --------------------------------------------------------

    def node_session(self, node_id: int) -> NodeSession | None:
        info, entry = self._cache.node(node_id), self._cache.entry(node_key(node_id))
        if info is None or entry is None or not entry.lease:
            return None
        return NodeSession(info, entry.lease, entry.mod_revision)

    async def witness_crash(self, session: NodeSession) -> frozenset[int] | None:
        return await bear_witness(self._etcd, self._prefix, self._w.key(node_key(session.info.node_id)), session,
                                  self.node_id)

    async def end_session(self, session: NodeSession) -> bool:
        return await end_session(self._etcd, session)

    def on_crash_witness(self, listener: Callable[[int], None]) -> None:
        self._witness_listeners.append(listener)

    def _witnessed(self, relative: str) -> None:
        parsed = parse_witness(relative)
        if parsed is None or parsed[2] == self.node_id:
            return
        for listener in list(self._witness_listeners):
            listener(parsed[0])

    # ---- leadership ----------------------------------------------------------------------------

    async def elect(self, topic: str, partition: int) -> PartitionState | None:
        """DESIGN §5's election: ``leaders/<t>/<p>`` absent and ``partitions/<t>/<p>`` unchanged
        since read -> epoch + 1 and the leader key on this node's lease. None when this node may
        not stand (outside the ISR, or in the ELR while a member of the ISR is alive:
        ``coordinator.eligibility``), another node leads, the partition changed meanwhile, or the
        session is not live."""
        record = self._cache.partition_record(topic, partition)
        if record is None or not self.session_alive():
            return None
        if self.node_id not in record.isr and any(self._cache.node(n) is not None for n in record.isr):
            return None
        roles = elected(record.replicas, record.isr, record.elr, self.node_id)
        if roles is None:
            return None
        lease = self._live_lease()
        if self._cache.leader(topic, partition) is not None:
            return None
        pkey, lkey = partition_key(topic, partition), leader_key(topic, partition)
        epoch = record.leader_epoch + 1
        bumped = PartitionRecord(record.topic_id, record.replicas, roles[0], epoch, roles[1])
        resp = await self._w.txn([cmp_create(self._w.key(lkey), 0),
                                  cmp_mod(self._w.key(pkey), self._cache.mod_revision(pkey))],
                               [op_put(self._w.key(pkey), bumped.encode()),
                                op_put(self._w.key(lkey), LeaderRecord(self.node_id, epoch).encode(), lease)])
        if not resp.succeeded:
            return None
        return PartitionState(topic, partition, record.replicas, roles[0], self.node_id, epoch, roles[1])

    async def withdraw(self, topic: str, partition: int) -> PartitionState | None:
        """This node restarted after an unclean shutdown and may lack records it acknowledged:
        leave the partition's ISR and ELR while another member stays eligible
        (``eligibility.withdrawn``), guarded by the record's revision. The new state, or None
        when nothing changed (not a member, or the last eligible replica)."""
        for _ in range(CONTENTION_RETRIES):
            record = self._cache.partition_record(topic, partition)
            if record is None:
                return None
            roles = withdrawn(record.replicas, record.isr, record.elr, self.node_id)
            if roles is None:
                return None
            pkey = partition_key(topic, partition)
            updated = dataclasses.replace(record, isr=roles[0], elr=roles[1])
            resp = await self._w.txn([cmp_mod(self._w.key(pkey), self._cache.mod_revision(pkey))],
                                     [op_put(self._w.key(pkey), updated.encode())])
            if resp.succeeded:
                leader = self._cache.leader(topic, partition)
                return PartitionState(topic, partition, record.replicas, roles[0],
                                      -1 if leader is None else leader.node, record.leader_epoch, roles[1])
        raise self._w.contended(f"withdrawing from {topic}/{partition}")

    async def resign(self, topic: str, partition: int) -> None:
        leader = self._cache.leader(topic, partition)
        if leader is None or leader.node != self.node_id:
            return
        key = self._w.key(leader_key(topic, partition))
        await self._w.txn([cmp_value(key, leader.encode())], [op_delete(key)])

    async def set_isr(self, topic: str, partition: int, leader_epoch: int, isr: tuple[int, ...],
                      elr: tuple[int, ...] = (), *,
                      based_on: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> PartitionState:
        """Replace the ISR and the ELR if this node leads the partition at ``leader_epoch`` (else
        ``StaleEpochError``); ``isr`` must be a non-empty subset of the replicas, ``elr`` distinct
        replicas outside it. ``based_on``: the ISR and ELR the change was computed from; when the
        stored ones differ (a replica withdrew meanwhile, decision 0385) nothing is written and
        ``CoordinatorError`` says so (the leader decides again from the new ones): a stale ELR
        written back would make a withdrawn replica eligible again."""
        for _ in range(CONTENTION_RETRIES):
            record = self._cache.partition_record(topic, partition)
            if record is None:
                raise UnknownTopicError(f"unknown partition {topic}/{partition}")
            leader = self._cache.leader(topic, partition)
            if record.leader_epoch != leader_epoch or leader != LeaderRecord(self.node_id, leader_epoch):
                raise StaleEpochError(f"{topic}/{partition} is at epoch {record.leader_epoch} led by "
                                      f"{leader.node if leader else 'no one'}, not epoch {leader_epoch} led by "
                                      f"node {self.node_id}", epoch=record.leader_epoch)
            if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(record.replicas):
                raise InvalidTopicError(f"an ISR is a non-empty subset of the replicas {list(record.replicas)}, "
                                        f"not {list(isr)}")
            wrong = check_elr(record.replicas, isr, elr)
            if wrong is not None:
                raise InvalidTopicError(wrong)
            if based_on is not None and (tuple(record.isr), tuple(record.elr)) != tuple(map(tuple, based_on)):
                raise CoordinatorError(f"the ISR or ELR of {topic}/{partition} changed meanwhile "
                                       f"({list(record.isr)}, {list(record.elr)}, not {list(based_on[0])}, "
                                       f"{list(based_on[1])}); not replaced")
            pkey, lkey = partition_key(topic, partition), leader_key(topic, partition)
            updated = PartitionRecord(record.topic_id, record.replicas, tuple(isr), leader_epoch, tuple(elr))
            resp = await self._w.txn([cmp_mod(self._w.key(pkey), self._cache.mod_revision(pkey)),
                                    cmp_value(self._w.key(lkey), leader.encode())],
                                   [op_put(self._w.key(pkey), updated.encode())])
            if resp.succeeded:
                return PartitionState(topic, partition, record.replicas, tuple(isr), self.node_id, leader_epoch,
                                      tuple(elr))
        raise self._w.contended(f"setting the ISR of {topic}/{partition}")

    async def reassign(self, topic: str, partition: int, replicas: tuple[int, ...]) -> PartitionState:
        """Set the replica list (preferred leader first); the ISR keeps its members that remain
        replicas, and never becomes empty: then it keeps the current leader (or stays as it was
        when there is none), since a new replica is not in sync until it has caught up."""
        if not replicas or len(set(replicas)) != len(replicas):
            raise InvalidTopicError(f"replicas must be distinct node ids, not {list(replicas)}")
        members = self._cache.members()
        unknown = [r for r in replicas if r not in members]
        if unknown:
            raise InvalidTopicError(f"unknown nodes {unknown}: not registered in this cluster")
        for _ in range(CONTENTION_RETRIES):
            record = self._cache.partition_record(topic, partition)
            if record is None:
                raise UnknownTopicError(f"unknown partition {topic}/{partition}")
            leader = self._cache.leader(topic, partition)
            isr = tuple(r for r in record.isr if r in replicas)
            if not isr:
                isr = (leader.node,) if leader is not None else record.isr
            elr = tuple(r for r in record.elr if r in replicas and r not in isr)
            pkey = partition_key(topic, partition)
            updated = PartitionRecord(record.topic_id, tuple(replicas), isr, record.leader_epoch, elr)
            resp = await self._w.txn([cmp_mod(self._w.key(pkey), self._cache.mod_revision(pkey))],
                                   [op_put(self._w.key(pkey), updated.encode())])
            if resp.succeeded:
                return PartitionState(topic, partition, tuple(replicas), isr,
                                      -1 if leader is None else leader.node, record.leader_epoch, elr)
        raise self._w.contended(f"reassigning {topic}/{partition}")

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[None]:
        """``locks/~<name>`` on this node's lease for the block: released at its end, or by the
        lease when this node dies holding it (``~`` keeps it apart from topic names)."""
        key = self._w.key(lock_key(EXCLUSIVE_PREFIX + name))
        token = encode({"node": self.node_id, "token": uuid.uuid4().hex})
        resp = await self._w.txn([cmp_create(key, 0)], [op_put(key, token, self._live_lease())])
        if not resp.succeeded:
            raise CoordinatorUnavailableError(f"{name} is already running on another node; retry once it ends")
        try:
            yield
        finally:
            try:
                await self._w.txn([cmp_value(key, token)], [op_delete(key)])
            except CoordinatorError as exc:  # the lease drops it when this node goes
                log.warning("cluster lock not released", extra={"fields": {"lock": name, "error": str(exc)}})

    async def hand_over(self, topic: str, partition: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                        leader: int, *, expected: tuple[int, ...] | None = None) -> None:
        """One transaction: if ``leader`` still leads at the stored epoch, the partition is as
        cached and (``expected``) its replica list is still that one, set ``replicas`` and
        ``isr`` and delete the leader key, so that the first live member of ``isr`` is elected
        next (epoch + 1). ``StaleEpochError`` otherwise (nothing changed)."""
        if not isr or not set(isr) <= set(replicas) or len(set(replicas)) != len(replicas):
            raise InvalidTopicError(f"an ISR is a non-empty subset of distinct replicas, not {list(isr)} of "
                                    f"{list(replicas)}")
        record = self._cache.partition_record(topic, partition)
        if record is None:
            raise UnknownTopicError(f"unknown partition {topic}/{partition}")
        held = self._cache.leader(topic, partition)
        if held is None or held != LeaderRecord(leader, record.leader_epoch):
            raise StaleEpochError(f"{topic}/{partition} is not led by node {leader} at epoch {record.leader_epoch}",
                                  epoch=record.leader_epoch)
        if expected is not None and tuple(record.replicas) != tuple(expected):
            raise StaleEpochError(f"{topic}/{partition} was reassigned meanwhile (replicas {list(record.replicas)}, "
                                  f"not {list(expected)})", epoch=record.leader_epoch)
        pkey, lkey = partition_key(topic, partition), leader_key(topic, partition)
        elr = tuple(r for r in record.elr if r in replicas and r not in isr)
        updated = PartitionRecord(record.topic_id, tuple(replicas), tuple(isr), record.leader_epoch, elr)
        resp = await self._w.txn([cmp_mod(self._w.key(pkey), self._cache.mod_revision(pkey)),
                                cmp_value(self._w.key(lkey), held.encode())],
                               [op_put(self._w.key(pkey), updated.encode()), op_delete(self._w.key(lkey))])
        if not resp.succeeded:
            raise StaleEpochError(f"{topic}/{partition} changed during the hand-over", epoch=record.leader_epoch)

    # ---- users, ACLs and group records (etcd_accounts.py) ----------------------------------------

    async def create_user(self, user: UserRecord) -> None:
        await self._accounts.create_user(user)

    async def find_user(self, name: str) -> UserRecord | None:
        return self._cache.user(name)

    async def list_users(self) -> list[UserRecord]:
        return self._cache.users()

    async def update_user(self, user: UserRecord) -> None:
        await self._accounts.update_user(user)

    async def delete_user(self, name: str, *, reassign_to: str | None = None) -> list[str]:
        return await self._accounts.delete_user(name, reassign_to=reassign_to)

    async def get_acl(self, topic: str) -> Acl:
        self._w.topic(topic)
        return self._cache.acl(topic)

    async def set_acl(self, topic: str, user: str, permissions: frozenset[str]) -> Acl:
        return await self._accounts.set_acl(topic, user, permissions)

    async def set_owner(self, topic: str, owner: str) -> TopicMetadata:
        return await self._accounts.set_owner(topic, owner)

    async def get_group(self, name: str) -> GroupRecord | None:
        return self._cache.group(name)

    async def list_group_records(self) -> list[GroupRecord]:
        return self._cache.groups()

    async def claim_group(self, name: str, owner: str | None) -> GroupRecord:
        return await self._accounts.claim_group(name, owner)

    async def set_group_acl(self, name: str, user: str, permissions: frozenset[str]) -> GroupRecord:
        return await self._accounts.set_group_acl(name, user, permissions)

    async def delete_group(self, name: str) -> None:
        await self._accounts.delete_group(name)

    # ---- usage records (decision 0298; etcd_usage.py) ---------------------------------------------

    async def put_usage(self, hour_ms: int, node_id: int, rows: list[list[Any]]) -> None:
        await self._usage.put(hour_ms, node_id, rows)

    async def usage_between(self, from_hour_ms: int, to_ms: int) -> list[tuple[int, int, list[list[Any]]]]:
        return await self._usage.between(from_hour_ms, to_ms)

    async def drop_usage_before(self, hour_ms: int) -> None:
        await self._usage.drop_before(hour_ms)
