"""The node: the composition root that owns the coordinator, the replicas and the metrics, and
the produce/fetch/admin logic the HTTP API calls.

Lifecycle: ``start()`` loads the coordinator's state and opens every partition log (recovering
as needed), then starts the maintenance task; ``stop()`` stops accepting work, releases waiting
fetches, flushes and closes every log and writes the checkpoints. Both are idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import time
from collections.abc import Callable, Collection
from typing import Any, Final, Literal, TypeVar, cast

import msgspec

from coordinator.base import Coordinator
from coordinator.errors import (
    CoordinatorError,
    CoordinatorUnavailableError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from coordinator.local import LocalCoordinator
from coordinator.models import (
    DEAD_LETTER_ID_KEY,
    INTERNAL_PREFIX,
    MetadataChange,
    NodeInfo,
    PartitionState,
    TopicMetadata,
    TopicSpec,
    check_partition_growth,
    clamp_config,
    dead_letter_id,
    topic_config_bounds,
    validate_name,
)
from coordinator.topic_config import alter_config
from internal_rpc.frames import MESSAGE_BYTES_MAX
from internal_rpc.messages import (
    Answer,
    FetchRequest,
    ListOffsetRequest,
    PartitionFiguresRequest,
    ProduceRequest,
    Request,
)
from internal_rpc.server import RpcServer
from logbroker.at_rest import AtRest
from logbroker.auth.bootstrap import build_auth, node_limits
from logbroker.auth.groups import GroupAccess
from logbroker.auth.permissions import Principal
from logbroker.cluster_groups import ClusterTopics, offsets_log
from logbroker.cluster_metrics import ClusterHealthCollector
from logbroker.config import NodeConfig
from logbroker.crash_watch import CrashWatch
from logbroker.dedup import WINDOW_KEY, WINDOW_MS_DEFAULT, Appended, identity
from logbroker.descriptors import PARTITIONS_MIN, DescriptorPlan, raise_open_files_limit
from logbroker.errors import (
    ANY_ERROR,
    BatchTooLargeError,
    BrokerError,
    DeadLetterRefusedError,
    ForbiddenError,
    ForwardOutcomeUnknownError,
    IdempotencyConflictError,
    InvalidRequestError,
    NoLeaderError,
    NotAClusterError,
    NotAvailableError,
    NotLeaderError,
    PartialWriteError,
    RemoteError,
    UnknownGroupError,
    UnknownPartitionError,
)
from logbroker.etcd_settings import etcd_coordinator, register_etcd_metrics
from logbroker.groups.coordinator import OFFSETS_PARTITIONS, OFFSETS_TOPIC, GroupCoordinator
from logbroker.groups.live import LiveGroups
from logbroker.internal_log import INTERNAL_LOG_CONFIG, ensure_internal_topic
from logbroker.metering.metrics import UsageCollector
from logbroker.metering.recorder import UsageRecorder
from logbroker.metrics import Metrics
from logbroker.partition_machine import PartitionState as MachineState
from logbroker.partition_machine import Phase, check_append, ms_of, solo
from logbroker.partition_moves import PartitionMover
from logbroker.partition_roles import NO_LEADER
from logbroker.partition_state import rack_replica
from logbroker.peers import Peers
from logbroker.producer_ids import Identity, key_identity
from logbroker.queues.manager import QueueManager, state_topic
from logbroker.reconciler import Reconciler
from logbroker.records import IncomingRecord, group_by_partition
from logbroker.replica_manager import Replica, ReplicaManager
from logbroker.replication.manager import ReplicationManager
from logbroker.rpc_service import SERVICE, node_service, rpc_security
from logbroker.state_metrics import GroupQueueCollector
from logbroker.storage_health import free_bytes, total_bytes
from logbroker.storage_usage import RECOUNT_S as STORAGE_RECOUNT_S
from logbroker.storage_usage import StorageUsage
from logbroker.supervisor import run_supervised
from logbroker.timestamps import TimestampWindow
from logbroker.topic_config_view import described_config
from segments.batch import (
    ATTRIBUTES_OFFSET,
    ENCRYPTED_FLAG,
    HEADER_SIZE,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    encode_batch,
    parse_header,
)
from segments.config import LogConfig
from segments.errors import InvalidBatchError, TooManyOpenFilesError
from segments.log import AppendInfo, LogRead, LogSlice
from segments.partitioning import DEFAULT_KEY_HASH, KEY_HASH_KEY

log = logging.getLogger(__name__)
A = TypeVar("A", bound=Answer)  # the answer type of an internal RPC request
Acks = Literal["0", "1", "all"]
ACKS: Final = ("0", "1", "all")
BACKGROUND_COMMITS_MAX: Final = 10_000
FORWARD_WAIT_MARGIN_S: Final = 3.0  # a forwarded fetch's deadline: its wait plus this
REMOTE_POLL_MS: Final = 500
PEER_DEADLINE_S: Final = 10.0
DRAIN_S: Final = 2.0  # a clean stop gives in-sync followers the whole log for at most this long
FORWARD_BATCH_BYTES_MAX: Final = MESSAGE_BYTES_MAX - 64 * 1024  # room for the call's other fields
LEADERS_WAIT_S: Final = 10.0
ROUND_PAUSE_S: Final = 0.02  # between rounds of the reconcile and replication loops (each waits itself)
LEADERS_POLL_S: Final = 0.02
FIGURES_DEADLINE_S: Final = 2.0
GROUP_TICK_MS: Final = 50
GROUP_TICK_BACKOFF_MAX_S: Final = 2.0  # sessions must still expire while a failure repeats
USAGE_STOP_WRITE_S: Final = 2.0


class Node:
    def __init__(self, config: NodeConfig, *, coordinator: Coordinator | None = None,
                 http_url: str = "", fsync: Callable[[int], None] = os.fsync) -> None:
        self.config = config
        self.base_log_config = LogConfig()
        self.config_bounds = topic_config_bounds(config.topic_segment_bytes_min)
        self.coordinator = coordinator or make_coordinator(config, http_url)
        self.at_rest = AtRest.from_file(config.encryption_keys_file, config.encryption_keys)
        self.replicas = ReplicaManager(config.data_dir, flush_threads=config.flush_threads,
                                       waiters_max=config.long_poll_waiters_max, fsync=fsync, at_rest=self.at_rest,
                                       compaction_bytes_per_s=config.compaction_bytes_per_s)
        self.metrics = Metrics(self.replicas.all, self.replicas.health, self.replicas.handles,
                               compaction=self.replicas.compactor.status)
        register_etcd_metrics(self.metrics.registry, self.coordinator)
        self.descriptors = DescriptorPlan(PARTITIONS_MIN * 4)
        self.auth = build_auth(config, self.coordinator, node_partitions_max=self.descriptors.partitions_max)
        self.group_access = GroupAccess(self.coordinator, self.auth.enabled)
        self.live_groups: list[LiveGroups] = []  # other protocols' groups (Kafka's), shown beside ours
        self.rpc: RpcServer | None = None
        self.rpc_address = ""
        self.peers: Peers | None = None
        self.crash_watch = CrashWatch(self.coordinator)
        # The helpers take the node's collaborators, and the node itself only as the narrow ports
        # of ``logbroker.ports`` (decision 0360).
        self.replication = ReplicationManager(config, self.coordinator, self.replicas, self)
        self.reconciler = Reconciler(self.coordinator, self.replication, self, config.node_id)
        self.moves = PartitionMover(self.coordinator, self.replicas, self, self.check_leads)
        self._reconcile_task: asyncio.Task[None] | None = None
        self._replication_task: asyncio.Task[None] | None = None
        self.ready = False
        self.kafka_address = ""  # the Kafka listener's advertised address (empty: none), set by ``start``
        self._round_robin = itertools.count()
        self._maintenance: asyncio.Task[None] | None = None
        self._group_ticker: asyncio.Task[None] | None = None
        self._groups: GroupCoordinator | None = None
        # the leader epochs this node's group and queue state were loaded at (a cluster): state
        # loaded under an earlier leadership is stale once another node led in between
        self._groups_epoch: int | None = None
        self._queue_epochs: dict[str, dict[tuple[str, int], int | None]] = {}
        self.queues = QueueManager(self.replicas, self._produce_to_dead_letters,
                                   on_withheld=self.metrics.count_withheld_dead_letters,
                                   check_managed=self._check_queue_managed)
        self.metrics.registry.register(GroupQueueCollector(lambda: self._groups, self.queues))
        self.metrics.registry.register(UsageCollector(lambda: self.auth.meter.ledger.totals))
        self.metrics.registry.register(ClusterHealthCollector(self.coordinator, self.replicas, self.replication,
                                                              self.reconciler, config.data_dir))
        self._background: set[asyncio.Task[None]] = set()
        self.storage = StorageUsage(self.coordinator, self.auth, self.replicas, self, config.node_id)
        self._storage_task: asyncio.Task[None] | None = None
        self.usage = UsageRecorder(self.auth.meter, self.coordinator, config.node_id, config.usage_retention_days,
                                   self.replicas.all, self.storage.payer_of)
        self._usage_task: asyncio.Task[None] | None = None
        self._growing = asyncio.Lock()
        self._stopped = False

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def clustered(self) -> bool:
        return self.coordinator.is_cluster

    @property
    def coordinator_kind(self) -> Literal["local", "etcd"]:
        """``local``: this node alone, its metadata in its data directory (no session to lose);
        ``etcd``: a cluster's, held by a lease-backed session."""
        return "etcd" if self.clustered else "local"

    async def start(self, http_url: str = "", grpc_address: str = "", kafka_address: str = "") -> None:
        """Open the node. ``http_url`` (and ``grpc_address``, the public gRPC API's, and
        ``kafka_address``, the Kafka listener's) is where clients reach this node (the listeners
        bind first, so a cluster node can advertise its real ports)."""
        self.descriptors = DescriptorPlan(raise_open_files_limit())
        self.replicas.handles.segments_max = self.descriptors.sealed_segments_max
        self.replicas.load_checkpoints()
        self.auth.limits = node_limits(self.config, node_partitions_max=self.descriptors.partitions_max,
                                       disk_bytes=total_bytes(self.config.data_dir))
        log.info("per-user defaults", extra={"fields": {"partitions_max": self.auth.limits.partitions_max,
                                                        "storage_bytes_max": self.auth.limits.storage_bytes_max}})
        if self.clustered:
            await self._start_rpc()
        self.kafka_address = kafka_address
        self.coordinator.advertise(self._node_info(http_url, grpc_address, kafka_address))
        await self.coordinator.start()
        await self._finish_deletions()
        self.auth.start()
        await self._bootstrap_admin()
        if self.clustered:
            await self._start_cluster()
            return
        for meta in await self.coordinator.list_topics():
            await self.replicas.open_topic(meta, self.log_config(meta))
        offsets_log = await ensure_internal_topic(self.coordinator, self.replicas, OFFSETS_TOPIC, OFFSETS_PARTITIONS,
                                                  self.base_log_config)
        self._groups = GroupCoordinator(self.replicas, offsets_log)
        self._groups.load()
        for meta in await self.coordinator.list_topics():
            if meta.kind == "queue":
                await self._open_queue(meta)
        await self._start_rpc()
        self._start_maintenance()
        self._group_ticker = asyncio.create_task(run_supervised(
            "group_sessions", self._tick_groups, GROUP_TICK_MS / 1000, backoff_max_s=GROUP_TICK_BACKOFF_MAX_S,
            on_failure=self.metrics.count_background_failure))
        self.ready = True

    def _node_info(self, http_url: str, grpc_address: str = "", kafka_address: str = "") -> NodeInfo:
        host = self.config.advertised_host or self.config.http_host
        rpc = f"{host}:{self.rpc.port}" if self.rpc is not None else ""
        return NodeInfo(self.config.node_id, http_url, rpc, self.config.rack or None, grpc_address,
                        started_ms=time.time_ns() // 1_000_000, kafka_address=kafka_address)

    async def _start_cluster(self) -> None:
        """A cluster node: its partitions follow the coordinator's metadata (``Reconciler``);
        ready once a first pass opened them and the coordinator holds a live session."""
        _, tls, token = rpc_security(self.config)
        self.peers = Peers(self.coordinator, tls=tls, cluster_token=token, node_id=self.config.node_id,
                           on_silent=self.crash_watch.suspect)
        self.coordinator.on_crash_witness(self.crash_watch.departed)
        self.coordinator.on_change(self.reconciler.notice)
        await self.reconciler.reconcile_once()
        await self.replicas.remove_strays()
        try:
            await self.reconcile_queues()
        except ANY_ERROR as exc:  # the reconcile rounds open them later
            log.warning("queues not reopened yet", extra={"fields": {"error": str(exc)}})
        self._reconcile_task = asyncio.create_task(run_supervised(
            "reconcile", self.reconciler.round, ROUND_PAUSE_S, on_failure=self.metrics.count_background_failure))
        self._replication_task = asyncio.create_task(run_supervised(
            "replication", self.replication.tick, ROUND_PAUSE_S,
            on_failure=self.metrics.count_background_failure))
        self._start_maintenance()
        self._group_ticker = asyncio.create_task(run_supervised(
            "group_sessions", self._tick_groups, GROUP_TICK_MS / 1000, backoff_max_s=GROUP_TICK_BACKOFF_MAX_S,
            on_failure=self.metrics.count_background_failure))
        self.ready = True

    @property
    def hosts_groups(self) -> bool:
        return self._groups is not None

    async def reconcile_groups(self) -> None:
        """A cluster node coordinates groups exactly while it leads ``__consumer_offsets``/0
        (``logbroker.cluster_groups``): take them up from the log, or let them go. Groups loaded
        under one leadership are let go when it ends, even if a later one is this node's again
        (another node may have led, and changed them, in between): they are loaded afresh."""
        log_ = offsets_log(self.coordinator, self.replicas, self.config.node_id)
        if log_ is not None and self._groups is None:
            self.take_up_leaderships(OFFSETS_TOPIC)
        epoch = self._groups_epoch_now() if log_ is not None else None
        if self._groups is not None and epoch != self._groups_epoch:
            groups, self._groups = self._groups, None
            await groups.close(self.config.shutdown_grace_ms / 1000)
            log.info("no longer coordinating consumer groups", extra={"fields": {
                "node": self.config.node_id, "loaded_at_epoch": self._groups_epoch, "epoch": epoch}})
        if log_ is not None and epoch is not None and self._groups is None:
            groups = GroupCoordinator(self.replicas, log_, topics=ClusterTopics(self.coordinator, self))
            groups.load()
            self._groups, self._groups_epoch = groups, epoch
            log.info("coordinating consumer groups", extra={"fields": {"node": self.config.node_id, "epoch": epoch}})

    async def reconcile_queues(self) -> None:
        """A cluster node manages exactly the queues whose partitions and state-log partitions it
        all leads (they share one replica list, so they fail over and back together): open those
        not open yet from their replicated state log, let go of the others. A queue opened under
        leaderships that have since changed (another node may have managed it in between) is let
        go and opened afresh from its log."""
        for meta in await self.coordinator.list_topics():
            if meta.kind != "queue":
                continue
            led = self._leads_queue(meta)
            if self.queues.has(meta.name) and (not led or not self._queue_still_led(meta.name)):
                self.queues.remove(meta.name)
                self._queue_epochs.pop(meta.name, None)
                log.info("no longer managing queue", extra={"fields": {"queue": meta.name}})
            if led and self.queues.has(meta.name):
                self.queues.reconfigure(meta)
            elif led:
                await self._open_queue(meta)
                self._queue_epochs[meta.name] = self._queue_led_at(meta)
                log.info("managing queue", extra={"fields": {"queue": meta.name}})

    def _queue_led_at(self, meta: TopicMetadata) -> dict[tuple[str, int], int | None]:
        """The epochs this node leads a queue's partitions and state-log partitions at (None: not)."""
        return {(topic, partition): self._led_epoch(topic, partition)
                for topic in (meta.name, state_topic(meta)) for partition in range(meta.partitions)}

    def _queue_still_led(self, name: str) -> bool:
        """Every partition the queue was opened with is led at the epoch it was opened at (a
        partition added since is the growth's business)."""
        return all(self._led_epoch(t, p) == epoch for (t, p), epoch in self._queue_epochs.get(name, {}).items())

    def _led_epoch(self, topic: str, partition: int) -> int | None:
        """The epoch this node leads a partition at now (None: it does not)."""
        leadership = self.replication.leadership(topic, partition)
        return None if leadership is None or leadership.closed else leadership.epoch

    def _check_queue_managed(self, name: str) -> None:
        meta = self.coordinator.cached_topic(name) if self.clustered else None
        if meta is not None and meta.kind == "queue":
            raise NoLeaderError(f"queue {name!r} is not managed here now (its leadership is moving); retry")

    def _leads_queue(self, meta: TopicMetadata) -> bool:
        me = self.config.node_id
        for topic in (meta.name, state_topic(meta)):
            for partition in range(meta.partitions):
                state = self.coordinator.cached_partition(topic, partition)
                if state is None or state.leader != me or not self.replicas.hosts(topic, partition):
                    return False
        return True

    def topic_changed(self, topic: str) -> None:
        """The watch touched ``topic`` (its partition count may have changed)."""
        if self._groups is not None:
            self._groups.topic_changed(topic)

    def local_high_watermark(self, topic: str, partition: int) -> int | None:
        """The high watermark of a partition this node serves; None when another node does (or
        none does now)."""
        try:
            if self._leader(topic, partition) is None:
                return self.replicas.get(topic, partition).high_watermark
        except NoLeaderError:
            pass
        return None

    async def await_leaders(self, name: str) -> None:
        await self._await_leaders(name)

    def _start_maintenance(self) -> None:
        self._maintenance = asyncio.create_task(run_supervised(
            "maintenance", self.replicas.maintain, self.config.maintenance_interval_ms / 1000,
            on_failure=self.metrics.count_background_failure))
        self._storage_task = asyncio.create_task(run_supervised(
            "storage_usage", self.storage.tick, STORAGE_RECOUNT_S, on_failure=self.metrics.count_background_failure))
        self._usage_task = asyncio.create_task(run_supervised(
            "usage_records", self.usage.flush, self.config.usage_flush_ms / 1000,
            on_failure=self.metrics.count_background_failure))

    async def open_hosted(self, meta: TopicMetadata, partitions: list[int]) -> None:
        """Open the logs of ``meta``'s partitions that this cluster node hosts; those open already
        take a changed config now (a user topic's: internal logs keep what they opened with)."""
        config = self.log_config(meta)
        if not meta.name.startswith(INTERNAL_PREFIX):
            self.replicas.reconfigure(meta.name, config)
        await self.replicas.open_topic(meta, config, partitions)

    def _queue_replicas(self, name: str) -> tuple[int, ...] | None:
        """The replica list every partition of a cluster's queue shares (its state log's too)."""
        if not self.clustered:
            return None
        state = self.coordinator.cached_partition(name, 0)
        return None if state is None else state.replicas

    def queue_home(self, name: str) -> int | None:
        """The node a cluster's queue lives on (the leader of its partition 0), None when unknown."""
        state = self.coordinator.cached_partition(name, 0)
        return None if state is None or state.leader == NO_LEADER else state.leader

    async def drop_local_topic(self, name: str, topic_id: str) -> None:
        """Remove this node's data of a topic deleted elsewhere in the cluster."""
        log.info("dropping the data of a deleted topic", extra={"fields": {"topic": name}})
        self.queues.remove(name)
        await self.replicas.remove_topic(name, topic_id)
        self.replicas.purge_deleted(topic_id)

    async def _open_queue(self, meta: TopicMetadata) -> None:
        """Open (creating it if needed) the queue's share-state log and replay it. The log has at
        least one partition per queue partition (it is grown first, see ``add_partitions``)."""
        flush = {k: v for k, v in meta.config.items() if k in ("flush", "flush_ms")}
        events = await ensure_internal_topic(self.coordinator, self.replicas, state_topic(meta), meta.partitions,
                                             self.base_log_config, flush, placed_on=self._queue_replicas(meta.name))
        if self.clustered:
            self.take_up_leaderships(meta.name)
            self.take_up_leaderships(state_topic(meta))
        self.queues.open(meta, events, await self._dead_letter_binding(meta))

    def take_up_leaderships(self, topic: str) -> None:
        """Take up at once the leaderships of ``topic`` the cache gives this node (before the reconcile
        round does), so that an internal log is written at its leader epoch from the start."""
        for partition in self.local_partitions(topic):
            state = self.coordinator.cached_partition(topic, partition)
            if state is not None and state.leader == self.config.node_id:
                self.replication.reconcile_partition(state)

    async def _dead_letter_binding(self, queue: TopicMetadata) -> str | None:
        """The id of the topic ``queue``'s dead letters go to. A queue created before queues were
        bound by id is bound, for this run, to the topic its dead-letter name names now, if any
        (decision 0173): the owner's write permission is still checked at each dead-lettering."""
        bound = dead_letter_id(queue)
        if bound is not None:
            return bound
        name = TopicSpec(queue.name, queue.partitions, None, queue.kind, queue.config).queue_settings()
        try:
            return (await self.coordinator.get_topic(name["dead_letter_topic"])).topic_id
        except UnknownTopicError:
            return None

    async def _produce_to_dead_letters(self, queue: str, topic: str, topic_id: str | None,
                                       records: list[IncomingRecord]) -> None:
        """Append a queue's dead letters to ``topic`` if it is still the topic the queue is bound to
        (``topic_id``) and the queue's owner may write to it now; ``DeadLetterRefusedError`` if not
        (the queue manager then withholds them, decision 0173)."""
        try:
            target: TopicMetadata | None = await self.coordinator.get_topic(topic)
        except UnknownTopicError:
            target = None
        if target is None or topic_id is None or target.topic_id != topic_id:
            replaced = ", and another topic of that name was created" if target is not None else ""
            raise DeadLetterRefusedError(f"the dead-letter topic {topic!r} the queue {queue!r} is bound to is gone "
                                         f"(deleted{replaced})", reason="gone")
        owner = (await self.coordinator.get_topic(queue)).owner
        try:
            await self.auth.authorize_owner(owner, topic, "write")
        except (ForbiddenError, UnknownTopicError) as exc:
            raise DeadLetterRefusedError(f"the owner of the queue {queue!r} may no longer write to its dead-letter "
                                         f"topic {topic!r}", reason="forbidden") from exc
        # A dead letter survives a failover; its bytes were the owner's already (no storage check),
        # and it keeps the timestamp its topic once accepted.
        await self.produce_records(topic, records, "all", check_storage=False, timestamp_window=False)

    @property
    def groups(self) -> GroupCoordinator:
        """The group coordinator this node runs, while it provably does: on a cluster, it leads the
        offsets log at the epoch the groups were loaded at and its lease has not lapsed (DESIGN §5
        fencing, as for writes). A node cut from etcd, or one whose cache still names it after
        another node led, answers no group call, reads included: its state may be stale."""
        self._check_serving()
        if self._groups is None:
            raise NoLeaderError("this node does not coordinate consumer groups now; retry")
        if self.clustered and not self._coordinates_groups():
            raise NoLeaderError("this node cannot prove it still coordinates consumer groups; retry")
        return self._groups

    def _coordinates_groups(self) -> bool:
        lease_valid = time.monotonic() < self.coordinator.lease_valid_until()
        return lease_valid and self._groups_epoch_now() == self._groups_epoch

    def _groups_epoch_now(self) -> int | None:
        """The leadership under which this node may coordinate groups now: the epoch at which it
        leads ``__consumer_offsets``/0 (its own leadership, not the cache's word; None: it does not)."""
        return self._led_epoch(OFFSETS_TOPIC, 0)

    async def _tick_groups(self) -> None:
        """Expire group members whose sessions lapsed and redeliver queue messages whose leases did."""
        if self._groups is not None:
            await self._groups.tick()
        await self.queues.sweep()  # a cluster node may hold queues without coordinating groups

    async def _start_rpc(self) -> None:
        if self.rpc is not None:
            return
        serve, tls, token = rpc_security(self.config)
        if not serve:
            return
        service = node_service(self.config.node_id, self, self.moves, self.replication, self.storage)
        self.rpc = RpcServer(self.config.http_host, self.config.rpc_port, {SERVICE: service}, tls=tls,
                             cluster_token=token, on_peer_gone=self.crash_watch.departed)
        port = await self.rpc.start()
        self.rpc_address = f"{self.config.http_host}:{port}"
        log.info("internal RPC serving", extra={"fields": {"rpc": self.rpc_address, "tls": tls is not None}})

    async def _bootstrap_admin(self) -> None:
        if not self.auth.enabled:
            return
        if self.config.admin_password:
            await self.auth.bootstrap_admin(self.config.admin_user, self.config.admin_password)
        elif not any(u.role == "admin" for u in await self.coordinator.list_users()):
            raise InvalidRequestError("configuration: authentication is on and no admin user exists; set "
                                      "admin_password (--admin-password or LOGBROKER_ADMIN_PASSWORD) for the first "
                                      "admin, or run with --auth off (development only)")

    def storage_state(self) -> dict[str, Any]:
        """The storage part of ``/readyz``: a full disk and the partitions offline."""
        return self.replicas.health.describe(free_bytes(self.config.data_dir), self.replicas.offline_partitions())

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.ready = False
        if self.clustered:
            with contextlib.suppress(*ANY_ERROR):
                await self.replication.drain(DRAIN_S)
        for task in (self._reconcile_task, self._replication_task, self._maintenance, self._group_ticker,
                     self._storage_task, self._usage_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._usage_task is not None:  # the last counts, while the coordinator is still there
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.usage.flush(), USAGE_STOP_WRITE_S)
        if self._groups is not None:
            await self._groups.close(self.config.shutdown_grace_ms / 1000)
        await self.replication.close()
        if self.rpc is not None:
            await self.rpc.close()
        if self.peers is not None:
            await self.peers.close()
        await self.crash_watch.close()
        if self._background:
            await asyncio.wait(self._background, timeout=self.config.shutdown_grace_ms / 1000)
        await self.queues.wait_snapshots(self.config.shutdown_grace_ms / 1000)
        await self.replicas.close()
        await self.coordinator.close()
        self.auth.close()

    def _check_serving(self) -> None:
        if not self.ready:
            raise NotAvailableError("the node is not serving (starting or stopping)")

    # ---- admin -------------------------------------------------------------------------------

    def log_config(self, meta: TopicMetadata) -> LogConfig:
        spec = TopicSpec(meta.name, meta.partitions, meta.replication_factor, meta.kind, meta.config)
        return clamp_config(spec.log_config(self.base_log_config), self.config_bounds)

    async def create_topic(self, body: object, *, owner: str | None = None) -> dict[str, Any]:
        """Create a topic or queue owned by ``owner``. A queue's dead-letter topic is created with it
        (owned by ``owner``) unless an explicit ``dead_letter_topic`` names an existing topic that
        ``owner`` may write to (else 403); either way the queue is bound to that topic's id."""
        self._check_serving()
        spec = TopicSpec.parse(body, base_config=self.base_log_config, bounds=self.config_bounds)
        self.at_rest.check_topic_config(spec.config)
        if self.clustered:
            return await self._create_cluster_topic(spec, owner)
        dead_letter = spec.queue_settings().get("dead_letter_topic")
        existing = {t.name for t in await self.coordinator.list_topics()}
        if spec.name in existing:
            raise TopicExistsError(f"{spec.name!r} already exists")
        bound = await self._existing_dead_letter(spec, dead_letter, owner) if dead_letter in existing else None
        await self._check_partition_budget(spec.partitions * (2 if spec.kind == "queue" else 1)
                                           + (1 if dead_letter is not None and bound is None else 0))
        created = None
        if dead_letter is not None and bound is None:
            dlq = TopicSpec(dead_letter, 1, spec.replication_factor, "topic", {})
            bound = created = await self.coordinator.create_topic(dlq, owner)
            await self.replicas.open_topic(created, self.log_config(created))
        if bound is not None:
            spec = dataclasses.replace(spec, config={**spec.config, DEAD_LETTER_ID_KEY: bound.topic_id})
        try:
            meta = await self.coordinator.create_topic(spec, owner)
        except CoordinatorError:
            if created is not None:  # the queue lost a race for its name: its dead-letter topic goes too
                await self.delete_topic(created.name)
            raise
        await self.replicas.open_topic(meta, self.log_config(meta))
        if meta.kind == "queue":
            await self._open_queue(meta)
        return await self.describe_topic(spec.name)

    async def _create_cluster_topic(self, spec: TopicSpec, owner: str | None) -> dict[str, Any]:
        """Create a topic in the cluster: the coordinator places it; every replica's node opens its
        log when the watch shows it, and the candidates stand for leadership. Answers once every
        partition has a leader (or after ``LEADERS_WAIT_S``, leaders then shown as -1)."""
        if spec.kind == "queue":
            return await self._create_cluster_queue(spec, owner)
        await self._check_partition_budget(spec.partitions)
        meta = await self.coordinator.create_topic(spec, owner)
        self.reconciler.notice(MetadataChange(topics=frozenset({meta.name})))
        await self._await_leaders(meta.name)
        return await self.describe_topic(meta.name)

    async def _create_cluster_queue(self, spec: TopicSpec, owner: str | None) -> dict[str, Any]:
        """A queue on a cluster keeps all its partitions and its share-state log on one replica
        list, led preferably by the node that took its creation, so that its manager has both at
        hand and they fail over together (decision 0198); its dead-letter topic is placed like any
        topic. Queue calls reach the manager from any node."""
        await self._check_partition_budget(spec.partitions * 2 + 1)
        dead_letter = spec.queue_settings()["dead_letter_topic"]
        if self.coordinator.cached_topic(dead_letter) is not None:
            bound = await self._existing_dead_letter(spec, dead_letter, owner)
        else:
            bound = await self.coordinator.create_topic(TopicSpec(dead_letter, 1, None, "topic", {}), owner)
        spec = dataclasses.replace(spec, config={**spec.config, DEAD_LETTER_ID_KEY: bound.topic_id})
        meta = await self.coordinator.create_topic(spec, owner, on_node=self.config.node_id)
        flush = {k: v for k, v in meta.config.items() if k in ("flush", "flush_ms")}
        with contextlib.suppress(TopicExistsError):
            await self.coordinator.create_topic(
                TopicSpec(state_topic(meta), meta.partitions, None, "topic", {**INTERNAL_LOG_CONFIG, **flush}), None,
                replicas=self._queue_replicas(meta.name))
        for name in (dead_letter, meta.name, state_topic(meta)):
            self.reconciler.notice(MetadataChange(topics=frozenset({name})))
            await self._await_leaders(name)
        if not self.queues.has(meta.name) and self._leads_queue(meta):  # a reconcile round may have opened it
            await self._open_queue(meta)
        return await self.describe_topic(meta.name)

    async def _await_leaders(self, name: str) -> None:
        """Wait (bounded) until this node's cache shows the topic and every partition has a
        leader. A topic the cache still does not show (its watch lags, e.g. right after etcd came
        back) is a retriable ``CoordinatorUnavailableError``: it was created all the same."""
        deadline = time.monotonic() + LEADERS_WAIT_S
        while time.monotonic() < deadline:
            try:
                states = await self.coordinator.partition_states(name)
            except UnknownTopicError:
                states = None
            if states is not None and all(s.leader != NO_LEADER for s in states):
                return
            await asyncio.sleep(LEADERS_POLL_S)
        if self.coordinator.cached_topic(name) is None:
            raise CoordinatorUnavailableError(f"{name!r} was created but this node's metadata does not show it yet")

    async def _existing_dead_letter(self, spec: TopicSpec, name: str, owner: str | None) -> TopicMetadata:
        """The existing topic ``name`` that a new queue names as its dead-letter topic, if it named
        it explicitly and ``owner`` may write to it (``ForbiddenError`` otherwise)."""
        if "dead_letter_topic" not in spec.config:
            # A user may create a topic named like another's future queue's dead-letter topic; the
            # queue's creator then picks another name (decision 0171).
            raise TopicExistsError(f"the dead letter topic {name!r} already exists; choose another with "
                                   "config.dead_letter_topic", field="config.dead_letter_topic")
        return await self.auth.authorize_owner(owner, name, "write")

    async def add_partitions(self, name: str, body: object) -> dict[str, Any]:
        """Raise a topic's or queue's partition count (``{"partitions": N}``); groups rebalance on
        their next check, and a queue's receivers take from the new partitions at once."""
        self._check_serving()
        validate_name(name, internal=True)
        if not isinstance(body, dict) or set(body) != {"partitions"}:
            raise InvalidRequestError('the body must be {"partitions": <new count>}')
        if name.startswith(INTERNAL_PREFIX):
            raise InvalidTopicError(f"{name!r} is internal: its partitions follow what it belongs to")
        if self.clustered and (await self.coordinator.get_topic(name)).kind == "queue":
            raise InvalidTopicError("a queue on a cluster cannot gain partitions yet (it lives on one node)")
        async with self._growing:  # one growth at a time: each reads the counts it raises
            current = await self.coordinator.get_topic(name)
            partitions = check_partition_growth(current, body["partitions"])
            per_partition = 2 if current.kind == "queue" else 1  # a queue partition has a state partition
            await self._check_partition_budget((partitions - current.partitions) * per_partition)
            if current.kind == "queue":
                # The state log first: a state partition without its queue partition is harmless
                # (a later growth reuses it), the other way round would lose deliveries.
                await self._grow_queue_state(current, partitions)
            meta = await self.coordinator.add_partitions(name, partitions)
            if self.clustered:
                self.reconciler.notice(MetadataChange(topics=frozenset({name})))
                await self._await_leaders(name)
                return await self.describe_topic(name)
            await self.replicas.open_topic(meta, self.log_config(meta))
            if meta.kind == "queue":
                self.queues.grow(meta, self.replicas.partitions(state_topic(meta)))
        return await self.describe_topic(name)

    async def alter_topic_config(self, name: str, changes: object) -> dict[str, Any]:
        """Change a topic's or queue's config live (``{key: value}``, null: back to the default;
        ``coordinator.topic_config`` decides what may change). The change is stored first (etcd's
        watch carries it to every replica's node), then applied to what this node holds."""
        self._check_serving()
        validate_name(name, internal=True)
        if name.startswith(INTERNAL_PREFIX):
            raise InvalidTopicError(f"{name!r} is internal: its config is the broker's")

        def update(current: TopicMetadata) -> dict[str, Any]:
            merged = alter_config(current, changes, base_config=self.base_log_config, bounds=self.config_bounds)
            if isinstance(changes, dict):
                self.at_rest.check_topic_config(changes)
            return merged

        meta = await self.coordinator.set_topic_config(name, update)
        log.info("topic config changed", extra={"fields": {"topic": name, "config": dict(meta.config)}})
        self.replicas.reconfigure(name, self.log_config(meta))
        if meta.kind == "queue":
            self.queues.reconfigure(meta)
        if self.clustered:
            self.reconciler.notice(MetadataChange(topics=frozenset({name})))
            for partition in self.local_partitions(name):
                state = self.coordinator.cached_partition(name, partition)
                if state is not None:
                    self.replication.reconcile_partition(state)
        return await self.describe_topic(name)

    async def _check_partition_budget(self, more: int) -> None:
        """Refuse, before anything is created, partitions beyond the node's descriptor budget: each
        keeps its active segment's file open (``logbroker.descriptors``)."""
        held = sum(meta.partitions for meta in await self.coordinator.list_topics())
        limit = self.descriptors.partitions_max
        if held + more > limit:
            raise TooManyOpenFilesError(
                f"the node holds {held} partitions and may hold {limit} (each keeps a file open; the limit follows "
                f"the process's descriptor limit, {self.descriptors.limit}): delete topics or raise `ulimit -n`")

    async def _grow_queue_state(self, queue: TopicMetadata, partitions: int) -> None:
        state = await self.coordinator.get_topic(state_topic(queue))
        if state.partitions < partitions:
            state = await self.coordinator.add_partitions(state.name, partitions)
        await self.replicas.open_topic(state, self.log_config(state))

    async def delete_topic(self, name: str) -> None:
        """Delete a topic (a queue with its state log). The space is freed before the metadata is
        rewritten, so that an operator can free a full disk this way (``ReplicaManager``); a
        deletion cut short is finished by the retry or by the next start."""
        self._check_serving()
        validate_name(name, internal=True)
        if name.startswith(INTERNAL_PREFIX):
            raise InvalidTopicError(f"{name!r} is internal: it goes with what it belongs to")
        meta = await self.coordinator.get_topic(name)
        doomed = [meta]
        if meta.kind == "queue":
            self.queues.remove(name)
            with contextlib.suppress(UnknownTopicError):
                doomed.append(await self.coordinator.get_topic(state_topic(meta)))
        for topic in doomed:
            self.replication.drop(topic.name)
            await self.replicas.remove_topic(topic.name, topic.topic_id)
        for topic in doomed:
            await self.coordinator.delete_topic(topic.name)
            self.replicas.purge_deleted(topic.topic_id)
            self.reconciler.forget(topic.name)

    async def _finish_deletions(self) -> None:
        """Finish the topic deletions a previous run began (their space is already freed)."""
        pending = self.replicas.pending_deletions()
        if not pending:
            return
        for meta in await self.coordinator.list_topics():
            if meta.topic_id in pending:
                log.warning("finishing an interrupted topic deletion", extra={"fields": {"topic": meta.name}})
                await self.replicas.remove_topic(meta.name, meta.topic_id)  # directories not marked yet
                await self.coordinator.delete_topic(meta.name)
        for topic_id in pending:
            self.replicas.purge_deleted(topic_id)

    async def delete_group(self, name: str) -> None:
        """Delete an empty consumer group: its committed offsets first (for good, see
        ``GroupCoordinator.delete_group``), then its owner and grants, so a crash in between leaves
        an owned empty name, never offsets that a stranger could claim."""
        try:
            await self.groups.delete_group(name)
        except UnknownGroupError:
            if await self.coordinator.get_group(name) is None:
                raise  # a claimed name whose first join failed has no offsets: only its claim goes
        await self.group_access.forget(name)

    async def list_topics(self, principal: Principal, *, internal: bool = False) -> list[dict[str, Any]]:
        """The topics ``principal`` may see; the broker's own ``__`` topics only with ``internal``."""
        visible = await self.auth.visible(principal, await self.coordinator.list_topics())
        return [self._summary(meta) for meta in visible if internal or not meta.name.startswith(INTERNAL_PREFIX)]

    def _summary(self, meta: TopicMetadata) -> dict[str, Any]:
        return {"name": meta.name, "kind": meta.kind, "partitions": meta.partitions,
                "replication_factor": meta.replication_factor, "owner": meta.owner}

    async def describe_topic(self, name: str, *, offsets: bool = True) -> dict[str, Any]:
        """The topic with ``partitions`` as a list (leader, replicas, in-sync and eligible leader
        replicas, offsets);
        ``partition_count`` is the number (listings use ``partitions`` for the number).

        ``offsets=False`` leaves out each partition's offsets and size, which come from its
        leader: the placement alone is answered from the coordinator and asks no peer, so a
        client's metadata read never waits on a paused or cut-off leader of another partition."""
        validate_name(name, internal=True)
        meta = await self.coordinator.get_topic(name)
        states = await self.coordinator.partition_states(name)
        figures = await self._partition_figures(name, states) if offsets else {}
        unknown = dict.fromkeys(("earliest_offset", "latest_offset", "log_end_offset", "size_bytes")) if offsets else {}
        partitions = []
        for state in states:
            partitions.append({
                "partition": state.partition, "leader": state.leader, "leader_epoch": state.leader_epoch,
                "replicas": list(state.replicas), "in_sync_replicas": list(state.isr),
                "eligible_leader_replicas": list(state.elr), **figures.get(state.partition, unknown),
            })
        config = described_config(meta, self.log_config(meta), encrypted_by_default=self.at_rest.ring is not None)
        return {**self._summary(meta), "partition_count": meta.partitions, "partitions": partitions,
                "topic_id": meta.topic_id, "created_ms": meta.created_ms, "config": config}

    # ---- routing (a cluster node serves what it leads and forwards the rest) ----------------

    def _cached_meta(self, topic: str) -> TopicMetadata:
        meta = self.coordinator.cached_topic(topic)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return meta

    def _partition_count(self, topic: str) -> int:
        if not self.clustered:
            return self.replicas.count(topic)
        return self._cached_meta(topic).partitions

    def _leader(self, topic: str, partition: int) -> int | None:
        """None when this node serves ``partition`` itself, else the id of the node leading it
        (``NoLeaderError`` when none does now, ``UnknownPartitionError``)."""
        if not self.clustered:
            return None
        state = self.coordinator.cached_partition(topic, partition)
        if state is None:
            count = self._partition_count(topic)
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition}", partitions=count)
        if state.leader == NO_LEADER:
            raise NoLeaderError(f"partition {partition} of {topic!r} has no leader now (an election is due)")
        if state.leader != self.config.node_id:
            return state.leader
        if not self.replicas.hosts(topic, partition):
            raise NoLeaderError(f"partition {partition} of {topic!r} is being opened on its leader")
        leadership = self.replication.leadership(topic, partition)
        if leadership is None or leadership.epoch != state.leader_epoch:
            self.replication.reconcile_partition(state)  # the cache moved ahead of the reconcile rounds
        return None

    async def peer_call(self, node_id: int, request: Request[A], *, deadline_s: float = PEER_DEADLINE_S) -> A:
        return await self._peers().call(node_id, request, deadline_s=deadline_s)

    async def peer_stream_call(self, node_id: int, request: Request[A], *, deadline_s: float = PEER_DEADLINE_S) -> A:
        return await self._peers().stream_call(node_id, request, deadline_s=deadline_s)

    def local_partitions(self, topic: str) -> list[int]:
        try:
            return [r.partition for r in self.replicas.partitions(topic)]
        except UnknownTopicError:
            return []

    async def drop_moved(self, topic: str, partitions: list[int]) -> None:
        """Delete this node's copies of partitions moved to other nodes."""
        log.info("dropping moved partitions", extra={"fields": {"topic": topic, "partitions": partitions}})
        for partition in partitions:
            self.moves.thaw(topic, partition)
        await self.replicas.drop_partitions(topic, partitions)

    async def rebalance(self, leaving: int | None) -> dict[str, Any]:
        """``/v1/cluster/rebalance`` (``leaving`` None) and ``/v1/cluster/decommission``."""
        self._check_serving()
        if not self.clustered:
            raise NotAClusterError("a single node has nothing to rebalance or decommission")
        return await self.moves.rebalance(leaving)

    def check_leads(self, topic: str, partition: int) -> None:
        """For a forwarded call: this node must lead the partition now (no second hop)."""
        if self._leader(topic, partition) is not None:
            raise NotLeaderError(f"node {self.config.node_id} does not lead partition {partition} of {topic!r}")

    def _topic_id(self, topic: str) -> str:
        return self._cached_meta(topic).topic_id

    def check_topic_id(self, topic: str, topic_id: object) -> None:
        """A forwarded call names the topic by id too: a leader whose topic of that name is another
        one (deleted and created again, one of the two caches behind) refuses it, retriably."""
        if topic_id is not None and self._topic_id(topic) != topic_id:
            raise NoLeaderError(f"the nodes disagree on which topic {topic!r} is (it was deleted and created "
                                "again); retry once the metadata settles")

    def _peers(self) -> Peers:
        if self.peers is None:
            raise NotAvailableError("the node is not serving (starting or stopping)")
        return self.peers

    def _max_batch_bytes(self, topic: str, partition: int) -> int:
        if self.replicas.hosts(topic, partition):
            return self.replicas.get(topic, partition).log.config.max_batch_bytes
        return self.log_config(self._cached_meta(topic)).max_batch_bytes

    # ---- produce -------------------------------------------------------------------------------

    async def produce_records(self, topic: str, records: list[IncomingRecord], acks: str,
                              idempotency_key: str | None = None, *, writer: str | None = None,
                              check_storage: bool = True, timestamp_window: bool = True) -> list[dict[str, int]]:
        """Append records (grouped into one batch per partition); offsets in request order.
        Partitions another node leads are forwarded to it as built batches. An
        ``idempotency_key`` is the ``writer``'s (the authenticated user): the same key of two
        users names two writes (``producer_ids.key_identity``). The topic owner's storage quota
        is checked here, where the write enters (``logbroker.storage_usage``).

        Every batch is built and checked against its partition's size limit, every partition's
        leader is known, and every partition led here has passed the write gate (in the same step
        as the appends, after the last await), before the first append, so a request that fails on
        input (or on a partition without a leader, or one the gate refuses) writes nothing to any
        partition."""
        self._check_serving()
        _check_acks(acks)
        _check_writable(topic)
        if timestamp_window:  # records stamped too far from this node's clock are refused (decision 0221)
            self._timestamp_window(topic).check_all((r.record.timestamp for r in records), time.time_ns() // 1_000_000)
        if idempotency_key is None:
            producer_id, producer_epoch, sequence = NO_PRODUCER_ID, -1, NO_SEQUENCE
            groups = group_by_partition(records, self._partition_count(topic), next(self._round_robin),
                                        self._key_hash(topic))
        else:  # placed by the key, so that a retry lands where the first try did
            if writer is None:
                raise ValueError("an idempotency key belongs to a writer; name it")
            producer_id, producer_epoch, sequence = key_identity(writer, idempotency_key)
            groups = group_by_partition(records, self._partition_count(topic), producer_id, self._key_hash(topic))
        batches = []
        for partition, indexes in groups.items():
            batch = encode_batch([records[i].record for i in indexes], producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=sequence)
            limit = self._max_batch_bytes(topic, partition)
            if len(batch) > limit:
                raise BatchTooLargeError(len(batch), limit)
            leader = self._leader(topic, partition)
            if leader is None and self.clustered:
                self._earlier_write(topic, self.replicas.get(topic, partition), batch)  # a conflict: nothing stored
            batches.append((partition, indexes, batch, leader))
        if check_storage:
            await self._check_storage(topic, [(partition, batch, leader) for partition, _, batch, leader in batches])
        for partition, _, _, leader in batches:  # the write gate, in the step that appends (no await between)
            if leader is None and self.clustered:
                self._check_append(topic, partition, acks)
        offsets: list[dict[str, int]] = [{}] * len(records)
        commits = []
        forwards = []
        for partition, indexes, batch, leader in batches:
            if leader is not None:
                forwards.append((partition, indexes, self._forward_batch(leader, topic, partition, batch, acks)))
                continue
            replica = self.replicas.get(topic, partition)
            info = self._append_once(topic, replica, batch, len(indexes))
            for n, i in enumerate(indexes):
                offsets[i] = {"partition": partition, "offset": info.base_offset + n}
            commits.append(replica.commit_replicated(info) if acks == "all" else replica.commit(info))
        if not forwards:
            await self._await_commits(commits, acks)
            return offsets
        # Every forward runs to its end (its outcome known) before the request answers.
        committed, *outcomes = await asyncio.gather(self._await_commits(commits, acks), *(f for _, _, f in forwards),
                                                  return_exceptions=True)
        failures = [(partition, outcome) for (partition, _, _), outcome in zip(forwards, outcomes, strict=True)
                    if isinstance(outcome, BaseException)]
        for (partition, indexes, _), base in zip(forwards, outcomes, strict=True):
            if isinstance(base, int):
                for n, i in enumerate(indexes):
                    offsets[i] = {"partition": partition, "offset": base + n}
        if isinstance(committed, BaseException):
            failures.append((-1, committed))
        if not failures:
            return offsets
        if not commits and len(failures) == len(forwards):  # nothing was stored anywhere
            unknown = [exc for _, exc in failures if isinstance(exc, ForwardOutcomeUnknownError)]
            raise unknown[0] if unknown else failures[0][1]
        raise PartialWriteError(
            f"the records were stored on some partitions and not on others ({len(failures)} failed); "
            "resending the request would store the stored part again",
            results=[{"partition": p, "code": getattr(exc, "code", "error"), "detail": str(exc)}
                     for p, exc in failures] + [o for o in offsets if o])

    async def _forward_batch(self, leader: int, topic: str, partition: int, batch: bytes, acks: str) -> int:
        if len(batch) > FORWARD_BATCH_BYTES_MAX:
            raise BatchTooLargeError(len(batch), FORWARD_BATCH_BYTES_MAX)
        if self._peers().unreachable(leader):  # refused before sending: nothing can be stored twice
            raise NoLeaderError(f"node {leader}, the leader, did not answer lately; retry", node=leader)
        answer = await self._peers().call(leader, ProduceRequest(topic=topic, partition=partition,
                                                                 topic_id=self._topic_id(topic), batch=batch,
                                                                 acks=cast(Acks, acks)), idempotent=False)
        return answer.base_offset

    async def produce_batch(self, topic: str, partition: int, batch: bytes, acks: str, *,
                            on_appended: Callable[[], None] | None = None) -> list[dict[str, int]]:
        """Append one prebuilt batch as it is (the broker only validates and stamps it).
        ``on_appended`` is called once this node has appended it, before the wait that ``acks``
        asks for (never for a batch forwarded to the leader): a caller that appends in order may
        start the next batch then."""
        self._check_serving()
        _check_acks(acks)
        _check_writable(topic)
        leader = self._leader(topic, partition)
        await self._check_storage(topic, [(partition, batch, leader)])
        if leader is not None:
            base = await self._forward_batch(leader, topic, partition, batch, acks)
            return [{"partition": partition, "offset": base}]
        return await self._append_here(topic, partition, batch, acks, on_appended)

    def answers_at_append(self, topic: str, partition: int, acks: str) -> bool:
        """True when a produce of ``acks`` to ``partition`` is answered as soon as this node has
        appended it: the node holds the partition, its log is not fsynced before an answer
        (``flush`` other than ``always``) and no in-sync replica is waited for (``acks`` 0 or 1,
        or a single node). False when in doubt (a partition held elsewhere, an unknown one)."""
        if acks == "all" and self.clustered:
            return False
        try:
            replica = self.replicas.get(topic, partition)
        except ANY_ERROR:
            return False
        if replica.in_cluster and replica.leader_hook is None:  # a follower here: the produce is forwarded
            return False
        return replica.log.config.flush != "always"

    async def _check_storage(self, topic: str, batches: list[tuple[int, bytes, int | None]]) -> None:
        """Refuse, before anything is stored or forwarded, batches that would take the topic's
        owner past their storage quota (``logbroker.storage_usage``). A batch this node's partition
        stored before (an idempotent retry, answered from the de-duplication window) costs nothing,
        so a retry of a write that was stored is answered as the first one was."""
        limited = await self.storage.limited(topic)
        if limited is None:
            return
        incoming = sum(len(batch) for partition, batch, leader in batches
                       if leader is not None or not self._stored_before(topic, partition, batch))
        self.storage.check(topic, limited, incoming)

    def _stored_before(self, topic: str, partition: int, batch: bytes) -> bool:
        return isinstance(self._earlier_write(topic, self.replicas.get(topic, partition), batch), Appended)

    async def produce_local_batch(self, topic: str, partition: int, batch: bytes, acks: str) -> list[dict[str, int]]:
        """Append a batch to a partition this node leads (a forwarded produce lands here)."""
        self._check_serving()
        _check_acks(acks)
        _check_writable(topic)
        self.check_leads(topic, partition)
        return await self._append_here(topic, partition, batch, acks)

    async def _append_here(self, topic: str, partition: int, batch: bytes, acks: str,
                           on_appended: Callable[[], None] | None = None) -> list[dict[str, int]]:
        self._check_append(topic, partition, acks)
        replica = self.replicas.get(topic, partition)
        info = self._append_once(topic, replica, batch, None)
        if on_appended is not None:
            on_appended()
        await self._await_commits([replica.commit_replicated(info) if acks == "all" else replica.commit(info)], acks)
        return [{"partition": partition, "offset": info.base_offset}]

    def _append_once(self, topic: str, replica: Replica, batch: bytes, records: int | None) -> AppendInfo:
        """Append ``batch``, or, when it is an idempotent batch this partition stored within its
        de-duplication window, append nothing and answer where the first one went (DESIGN §4).
        The same identity with another record count is ``idempotency_conflict``."""
        earlier = self._earlier_write(topic, replica, batch)
        if isinstance(earlier, Appended):
            self.metrics.count_duplicate(topic)
            return AppendInfo(earlier.base_offset, earlier.last_offset, earlier.last_offset + 1)
        info = replica.append(self._at_rest(topic, batch))
        if earlier is not None:
            assert replica.dedup is not None  # built by the lookup
            replica.dedup.record(earlier, info.base_offset, info.last_offset, time.time_ns() // 1_000_000)
        self._appended(topic, replica.partition)
        self.storage.appended(topic, len(batch))
        self.metrics.count_in(topic, len(batch),
                              records if records is not None else info.last_offset - info.base_offset + 1)
        return info

    def _at_rest(self, topic: str, batch: bytes) -> bytes | memoryview:
        """``batch`` as it is to be stored: sealed when the topic's ``encryption`` says so
        (decision 0316). A batch a client marked sealed is refused: only the node seals."""
        if len(batch) >= HEADER_SIZE and batch[ATTRIBUTES_OFFSET] & ENCRYPTED_FLAG:  # bit 6: the low byte
            raise InvalidBatchError("a produced batch cannot carry the encrypted-at-rest flag (attributes bit 6): "
                                    "the node encrypts")
        meta = self.coordinator.cached_topic(topic)
        return self.at_rest.seal(batch) if self.at_rest.wants(None if meta is None else meta.config) else batch

    def _earlier_write(self, topic: str, replica: Replica, batch: bytes) -> Appended | Identity | None:
        """Where the partition stored ``batch`` before (within its de-duplication window), or the
        batch's identity when it did not, or None for a batch without one. The same identity with
        another record count is ``idempotency_conflict``."""
        found = identity(parse_header(batch)) if len(batch) >= HEADER_SIZE else None
        if found is None:
            return None
        now = time.time_ns() // 1_000_000
        window = replica.dedup_window(self._dedup_window_ms(topic), now, self.config.dedup_entries_max)
        first = window.find(found, now)
        if first is None:
            window.check_sequence(found, now)
            return found
        count = parse_header(batch).record_count
        if count != first.records:
            raise IdempotencyConflictError(
                f"this idempotency key (or producer sequence) was used for {first.records} record(s) on partition "
                f"{replica.partition}, not {count}; nothing was stored", partition=replica.partition)
        return first

    def check_timestamps(self, topic: str, low: int, high: int) -> None:
        """Refuse (``invalid_timestamp``) records stamped ``low`` to ``high`` that lie outside the
        window ``topic`` accepts around this node's clock (decision 0221)."""
        self._timestamp_window(topic).check(low, high, time.time_ns() // 1_000_000)

    def _timestamp_window(self, topic: str) -> TimestampWindow:
        meta = self.coordinator.cached_topic(topic)
        return TimestampWindow.of({} if meta is None else meta.config)

    def _key_hash(self, topic: str) -> str:
        """The topic's ``key_hash`` (``segments.partitioning``): where its keyed records go."""
        meta = self.coordinator.cached_topic(topic)
        value = None if meta is None else meta.config.get(KEY_HASH_KEY)
        return value if isinstance(value, str) else DEFAULT_KEY_HASH

    def _dedup_window_ms(self, topic: str) -> int:
        meta = self.coordinator.cached_topic(topic)
        value = None if meta is None else meta.config.get(WINDOW_KEY)
        return value if isinstance(value, int) and not isinstance(value, bool) else WINDOW_MS_DEFAULT

    def _check_append(self, topic: str, partition: int, acks: str) -> None:
        """The one write gate (decision 0340): ``partition_machine.check_append`` over the state of
        a partition this node serves, read from its leadership, its lease and a move's freeze.
        ``not_leader`` (not leading it now, a lapsed lease: DESIGN §5 fencing, a freeze, a hand-over),
        ``not_enough_replicas`` under ``min_insync_replicas`` for ``acks=all``; nothing is stored
        when it refuses. Checked on the write path itself, after any pause."""
        now_ms = time.monotonic_ns() // 1_000_000
        frozen_until_ms = self.moves.frozen_until_ms(topic, partition, now_ms)
        if not self.clustered:
            state = solo(topic, partition, self.config.node_id, self.replicas.get(topic, partition).log.log_end_offset)
            if frozen_until_ms is not None:
                state = msgspec.structs.replace(state, phase=Phase.FROZEN, frozen_until_ms=frozen_until_ms)
        else:
            lease_until_ms = ms_of(self.coordinator.lease_valid_until())
            leadership = self.replication.leadership(topic, partition)
            state = (MachineState(topic, partition, self.config.node_id, lease_until_ms=lease_until_ms)
                     if leadership is None else leadership.machine_state(lease_until_ms, frozen_until_ms))
        error = check_append(state, acks, now_ms)
        if error is not None:
            raise error

    def _appended(self, topic: str, partition: int) -> None:
        if self.clustered:
            leadership = self.replication.leadership(topic, partition)
            if leadership is not None:
                self.replication.appended(leadership)

    async def _await_commits(self, commits: list[Any], acks: str) -> None:
        if acks != "0":
            if len(commits) == 1:  # one partition: no task and gathering future for it
                await commits[0]
            else:
                await asyncio.gather(*commits)
            return
        if len(self._background) + len(commits) > BACKGROUND_COMMITS_MAX:
            await asyncio.gather(*commits)
            return
        for commit in commits:
            task = asyncio.ensure_future(commit)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # ---- fetch ---------------------------------------------------------------------------------

    def _fetch_args(self, max_bytes: int, wait_ms: int) -> tuple[int, int]:
        return min(max_bytes, self.config.fetch_bytes_max), min(max(wait_ms, 0), self.config.fetch_wait_ms_max)

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int,
                    wait_ms: int, *, client_rack: str | None = None) -> tuple[LogRead, int]:
        """Whole batches from ``offset`` below the high watermark (long-polls at the end); from
        the leader when another node leads the partition, or from an in-sync replica in the
        reader's ``client_rack`` when there is one (``_fetch_in_rack``)."""
        self._check_serving()
        if client_rack:
            near = await self._fetch_in_rack(topic, partition, offset, max_bytes, wait_ms, client_rack)
            if near is not None:
                return near
        remote = await self._fetch_elsewhere(topic, partition, offset, max_bytes, wait_ms)
        if remote is not None:
            return remote
        return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)

    async def _fetch_elsewhere(self, topic: str, partition: int, offset: int, max_bytes: int,
                               wait_ms: int) -> tuple[LogRead, int] | None:
        """A fetch of a partition another node leads, from that leader; when it has no leader now
        or its leader cannot be reached, from an in-sync replica up to the high watermark that
        replica knows (DESIGN §6 read fallback). None when this node leads the partition."""
        try:
            leader = self._leader(topic, partition)
        except NoLeaderError as exc:
            return await self._fetch_from_replica(topic, partition, offset, max_bytes, wait_ms, None, exc)
        if leader is None:
            return None
        if self._peers().unreachable(leader):
            failure = NoLeaderError(f"node {leader}, the leader, did not answer lately", node=leader)
        else:
            try:
                return await self._fetch_remote(leader, topic, partition, offset, max_bytes, wait_ms)
            except NoLeaderError as exc:  # not answered: the leader is down, paused or cut off
                failure = exc
        return await self._fetch_from_replica(topic, partition, offset, max_bytes, wait_ms, leader, failure)

    async def _fetch_from_replica(self, topic: str, partition: int, offset: int, max_bytes: int, wait_ms: int,
                                  leader: int | None, failure: BrokerError) -> tuple[LogRead, int]:
        state = self.coordinator.cached_partition(topic, partition)
        if state is None:
            raise failure
        me = self.config.node_id
        for node_id in sorted((n for n in state.isr if n != leader), key=lambda n: n != me):
            if node_id == me:
                if self.replicas.hosts(topic, partition):
                    return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)
                continue
            if self.coordinator.cached_node(node_id) is None:
                continue
            try:
                return await self._fetch_remote(node_id, topic, partition, offset, max_bytes, wait_ms, replica=True)
            except NoLeaderError:
                continue
        raise failure

    async def fetch_replica(self, topic: str, partition: int, offset: int, max_bytes: int,
                            wait_ms: int) -> tuple[LogRead, int]:
        """A fetch another node sent here because the leader could not serve it: served from
        this node's in-sync copy, up to its high watermark."""
        self._check_serving()
        if not self._serves_copy(topic, partition, offset):
            raise NoLeaderError(f"node {self.config.node_id} holds no in-sync copy of partition {partition} "
                                f"of {topic!r} up to offset {offset}")
        return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)

    def _serves_copy(self, topic: str, partition: int, offset: int) -> bool:
        """True when this node's copy of the partition is in sync and exposes ``offset`` (at most
        its high watermark, where a read waits): past that only the leader can answer."""
        state = self.coordinator.cached_partition(topic, partition)
        if state is None or self.config.node_id not in state.isr or not self.replicas.hosts(topic, partition):
            return False
        replica = self.replicas.get(topic, partition)
        return replica.log.log_start_offset <= offset <= replica.high_watermark

    async def _fetch_in_rack(self, topic: str, partition: int, offset: int, max_bytes: int, wait_ms: int,
                             client_rack: str) -> tuple[LogRead, int] | None:
        """A read served by the in-sync replica in the reader's rack (``partition_state.rack_replica``):
        this node's copy, or another's over internal RPC. None — read as usual, from the leader —
        when the rack has no such replica, it is the leader, or it cannot serve ``offset`` now."""
        state = self.coordinator.cached_partition(topic, partition) if self.clustered else None
        if state is None or state.leader == NO_LEADER:
            return None
        me = self.config.node_id
        target = rack_replica(state.isr, state.leader, self._isr_racks(state.isr), client_rack, me)
        if target is None or target == state.leader:
            return None
        if target == me:
            if not self._serves_copy(topic, partition, offset):
                return None
            return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)
        if self._peers().unreachable(target):
            return None
        try:
            return await self._fetch_remote(target, topic, partition, offset, max_bytes, wait_ms, replica=True)
        except (NoLeaderError, RemoteError):
            return None

    def _isr_racks(self, isr: Collection[int]) -> dict[int, str | None]:
        me = self.config.node_id
        racks = {n: (info.rack if info is not None else None)
                 for n, info in ((n, self.coordinator.cached_node(n) if n != me else None) for n in isr)}
        racks[me] = self.config.rack or None
        return racks

    def preferred_read_replica(self, topic: str, partition: int, client_rack: str | None) -> int | None:
        """The node a reader in ``client_rack`` should fetch from instead of this one, Kafka's
        ``preferred_read_replica`` (KIP-392): the in-sync replica ``partition_state.rack_replica``
        names, when that is another node; None to read here (this node is it, no replica is in the
        rack, or the partition has no leader now)."""
        state = self.coordinator.cached_partition(topic, partition) if self.clustered and client_rack else None
        if state is None or state.leader == NO_LEADER:
            return None
        me = self.config.node_id
        target = rack_replica(state.isr, state.leader, self._isr_racks(state.isr), client_rack, me)
        return None if target is None or target == me or self._peers().unreachable(target) else target

    async def fetch_local(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int) -> tuple[LogRead, int]:
        """A fetch forwarded here: served only if this node leads the partition."""
        self._check_serving()
        self.check_leads(topic, partition)
        return await self._fetch_here(topic, partition, offset, max_bytes, wait_ms)

    async def _fetch_here(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int) -> tuple[LogRead, int]:
        replica = self.replicas.get(topic, partition)
        max_bytes, wait_ms = self._fetch_args(max_bytes, wait_ms)
        if wait_ms and offset == replica.high_watermark:  # a tail that caught up: nothing to read yet
            await replica.wait_for_data(offset, wait_ms)
            wait_ms = 0
        result = self.replicas.read_plain(replica, offset, max_bytes, offset_max=replica.high_watermark)
        if not result.data and wait_ms:
            await replica.wait_for_data(offset, wait_ms)
            result = self.replicas.read_plain(replica, offset, max_bytes, offset_max=replica.high_watermark)
        if result.data:
            self.metrics.count_out(topic, len(result.data), result.next_offset - max(offset, result.first_offset))
        return result, replica.high_watermark

    async def _fetch_remote(self, leader: int, topic: str, partition: int, offset: int, max_bytes: int,
                            wait_ms: int, *, replica: bool = False) -> tuple[LogRead, int]:
        max_bytes, wait_ms = self._fetch_args(max_bytes, wait_ms)
        answer = await self._peers().call(
            leader, FetchRequest(topic=topic, topic_id=self._topic_id(topic), partition=partition, offset=offset,
                                 max_bytes=max_bytes, wait_ms=wait_ms, replica=replica),
            deadline_s=wait_ms / 1000 + FORWARD_WAIT_MARGIN_S)
        return LogRead(memoryview(answer.data), answer.first_offset, answer.next_offset), answer.high_watermark

    async def fetch_slice(self, topic: str, partition: int, offset: int, max_bytes: int,
                          wait_ms: int, *, client_rack: str | None = None) -> tuple[LogSlice | LogRead | None, int]:
        """Like ``fetch`` but a ``LogSlice`` for zero-copy sending when this node leads the
        partition (None when empty); the bytes a leader sent (a ``LogRead``) when another does."""
        self._check_serving()
        if client_rack:
            near = await self._fetch_in_rack(topic, partition, offset, max_bytes, wait_ms, client_rack)
            if near is not None:
                result, hwm = near
                return (result if result.data else None), hwm
        remote = await self._fetch_elsewhere(topic, partition, offset, max_bytes, wait_ms)
        if remote is not None:
            result, hwm = remote
            return (result if result.data else None), hwm
        replica = self.replicas.get(topic, partition)
        max_bytes, wait_ms = self._fetch_args(max_bytes, wait_ms)
        piece = replica.log.slice(offset, max_bytes, offset_max=replica.high_watermark)
        if piece is None and wait_ms:
            await replica.wait_for_data(offset, wait_ms)
            piece = replica.log.slice(offset, max_bytes, offset_max=replica.high_watermark)
        if piece is not None and self.at_rest.ring is not None and not self.at_rest.slice_is_plain(piece):
            piece.close()  # sealed batches are opened, so they are read, not sent from the file
            result = self.replicas.read_plain(replica, offset, max_bytes, offset_max=replica.high_watermark)
            self.metrics.bytes_out.labels(topic).inc(len(result.data))
            return (result if result.data else None), replica.high_watermark
        if piece is not None:
            self.metrics.count_out(topic, piece.size_bytes, piece.next_offset - max(offset, piece.first_offset))
        return piece, replica.high_watermark

    async def wait_for_any(self, positions: list[tuple[str, int, int]], wait_ms: int) -> None:
        """Return once one of ``(topic, partition, offset)`` has data at its offset, or after
        ``wait_ms`` (capped like a fetch's long-poll). Positions led by other nodes are not
        waited on: the wait is then cut to ``REMOTE_POLL_MS`` so that the caller polls them."""
        self._check_serving()
        _, wait_ms = self._fetch_args(0, wait_ms)
        local = [(t, p, o) for t, p, o in positions if self._serves_here(t, p)]
        if len(local) < len(positions):
            wait_ms = min(wait_ms, REMOTE_POLL_MS)
        waits = [asyncio.ensure_future(self.replicas.get(t, p).wait_for_data(o, wait_ms)) for t, p, o in local]
        if not waits:
            await asyncio.sleep(wait_ms / 1000)
            return
        try:
            await asyncio.wait(waits, timeout=wait_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when the caller is cancelled (its client went): no waiter outlives it
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def leader_elsewhere(self, topic: str, partition: int) -> int | None:
        """The partition's leader when it is another node (a hint for clients that sent a call
        here: they read the metadata again), else None."""
        if not self.clustered:
            return None
        state = self.coordinator.cached_partition(topic, partition)
        if state is None or state.leader in (NO_LEADER, self.config.node_id):
            return None
        return state.leader

    def _serves_here(self, topic: str, partition: int) -> bool:
        """This node leads ``partition`` now (False while it has no leader: the caller polls)."""
        try:
            return self._leader(topic, partition) is None
        except NoLeaderError:
            return False

    async def list_offset(self, topic: str, partition: int, at: str) -> dict[str, int | None]:
        """``earliest``, ``latest`` (the high watermark) or the first offset at a timestamp."""
        self._check_serving()
        leader = self._leader(topic, partition)
        if leader is None:
            return self._offset_here(topic, partition, at)
        answer = await self._peers().call(leader, ListOffsetRequest(topic=topic, partition=partition, at=at))
        return {"partition": partition, "offset": answer.offset}

    def list_local_offset(self, topic: str, partition: int, at: str) -> dict[str, int | None]:
        """An offsets call forwarded here: answered only if this node leads the partition."""
        self._check_serving()
        self.check_leads(topic, partition)
        return self._offset_here(topic, partition, at)

    def _offset_here(self, topic: str, partition: int, at: str) -> dict[str, int | None]:
        replica = self.replicas.get(topic, partition)
        if at == "earliest":
            offset: int | None = replica.log.log_start_offset
        elif at == "latest":
            offset = replica.high_watermark
        else:
            try:
                timestamp = int(at)
            except ValueError as exc:
                raise InvalidRequestError("at must be earliest, latest or a timestamp in ms") from exc
            found = replica.log.offset_for_timestamp(timestamp)
            offset = replica.high_watermark if found is None else min(found, replica.high_watermark)
        return {"partition": partition, "offset": offset}

    def local_figures(self, topic: str, partitions: list[int]) -> dict[int, dict[str, float]]:
        """Offsets and size of the partitions of ``topic`` this node leads (for describe), and
        the dirty ratio and last compaction of a compacted topic's."""
        figures: dict[int, dict[str, float]] = {}
        for partition in partitions:
            if self._leader(topic, partition) is None and self.replicas.hosts(topic, partition):
                replica = self.replicas.get(topic, partition)
                figures[partition] = {
                    "earliest_offset": replica.log.log_start_offset, "latest_offset": replica.high_watermark,
                    "log_end_offset": replica.log.log_end_offset, "size_bytes": replica.log.size_bytes}
                if replica.log.config.compacts and not topic.startswith("__"):
                    status = self.replicas.compactor.status.get((topic, partition))
                    figures[partition]["dirty_ratio"] = round(replica.log.dirty_ratio(), 4)
                    figures[partition]["last_compaction_ms"] = 0 if status is None else status.last_ms
        return figures

    async def _partition_figures(self, topic: str, states: list[PartitionState]) -> dict[int, dict[str, float]]:
        """Offsets and size of every partition: local ones from the logs, the others from their
        leaders (one call per leader, bounded; a leader that does not answer leaves nulls)."""
        by_leader: dict[int, list[int]] = {}
        for state in states:
            by_leader.setdefault(state.leader, []).append(state.partition)
        figures = self.local_figures(topic, by_leader.pop(self.config.node_id, []) if self.clustered
                                     else [s.partition for s in states])
        by_leader.pop(NO_LEADER, None)
        if not by_leader or self.peers is None:
            return figures

        async def ask(leader: int, partitions: list[int]) -> None:
            try:
                answer = await self._peers().call(leader, PartitionFiguresRequest(topic=topic, partitions=partitions),
                                                  deadline_s=FIGURES_DEADLINE_S)
            except ANY_ERROR as exc:
                log.info("partition figures unavailable", extra={"fields": {"node": leader, "error": str(exc)}})
                return
            for key, value in answer.figures.items():
                if key in partitions:
                    figures[key] = value

        await asyncio.gather(*(ask(leader, parts) for leader, parts in by_leader.items()))
        return figures

    async def cluster(self, principal: Principal) -> dict[str, Any]:
        """Nodes (``alive`` from their leases), what coordinates them, and the placement of the
        topics ``principal`` may see. ``counts`` counts only those: ``topics`` and ``partitions``
        what ``GET /v1/topics`` lists to the same caller, ``internal_*`` the broker's own ``__``
        topics among them (an admin's)."""
        nodes = await self.coordinator.cluster_nodes()
        topics = []
        counts = dict.fromkeys(("topics", "partitions", "internal_topics", "internal_partitions"), 0)
        for meta in await self.auth.visible(principal, await self.coordinator.list_topics()):
            states = await self.coordinator.partition_states(meta.name)
            config = described_config(meta, self.log_config(meta), encrypted_by_default=self.at_rest.ring is not None)
            topics.append({"name": meta.name, "config": config, "partitions": [
                {"partition": s.partition, "leader": s.leader, "leader_epoch": s.leader_epoch,
                 "replicas": list(s.replicas), "in_sync_replicas": list(s.isr),
                 "eligible_leader_replicas": list(s.elr)} for s in states]})
            kind = "internal_" if meta.name.startswith(INTERNAL_PREFIX) else ""
            counts[f"{kind}topics"] += 1
            counts[f"{kind}partitions"] += len(states)
        me = self.config.node_id
        return {"cluster": self.config.cluster_name, "node_id": me, "coordinator": self.coordinator_kind,
                "counts": counts,
                "nodes": [{"node_id": n.info.node_id, "http_url": n.info.http_url,
                           "rpc_address": self.rpc_address if n.info.node_id == me and not self.clustered
                           else n.info.rpc_address,
                           "grpc_address": n.info.grpc_address, "kafka_address": n.info.kafka_address or None,
                           "rack": n.info.rack, "alive": n.alive}
                          for n in nodes],
                "controller": self.coordinator.node_id, "topics": topics}


def make_coordinator(config: NodeConfig, http_url: str = "") -> Coordinator:
    """The embedded coordinator, or etcd's for ``etcd://`` / ``etcds://host:port[,host:port...]``."""
    info = NodeInfo(config.node_id, http_url, f"{config.http_host}:{config.rpc_port}", config.rack or None)
    if config.coordinator == "local":
        return LocalCoordinator(config.data_dir, info)
    return etcd_coordinator(config, info)


def _check_acks(acks: str) -> None:
    if acks not in ACKS:
        raise InvalidRequestError(f"acks must be 0, 1 or all, not {acks!r}")


def _check_writable(topic: str) -> None:
    """Internal topics hold the broker's own state (offsets, queue deliveries): only it writes them."""
    if topic.startswith(INTERNAL_PREFIX):
        raise InvalidTopicError(f"{topic!r} is internal: only the broker writes to it")
