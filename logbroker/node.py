"""The node: the composition root and lifecycle owner. It builds the coordinator, the replicas,
the metrics and every helper, and the parts the protocols call (decision 0393):

- ``router`` (``logbroker.routing``): where a call is served, here or by which node (a partition,
  the consumer groups, a queue: ``Router.locate``, decision 0399);
- ``writes`` (``logbroker.write_path``): produce, local or forwarded, through the one write gate;
- ``reads`` (``logbroker.read_path``): fetch, offsets and partition figures;
- ``topics`` (``logbroker.topic_admin``): create, grow, reconfigure, describe, list, delete;
- ``queue_hosting`` (``logbroker.queue_hosting``): which queues this node manages, dead letters.

Each part takes the collaborators it uses and small callables, never the node. The node itself
keeps the lifecycle, the reconcile callbacks (``logbroker.ports.PartitionHost``), consumer groups,
the internal RPC's start and the peer calls (``PeerTransport``).

Lifecycle: ``start()`` loads the coordinator's state and opens every partition log (recovering
as needed), then starts the maintenance task; ``stop()`` stops accepting work, releases waiting
fetches, flushes and closes every log and writes the checkpoints. Both are idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

from coordinator.base import Coordinator
from coordinator.errors import UnknownTopicError
from coordinator.local import LocalCoordinator
from coordinator.models import (
    INTERNAL_PREFIX,
    NodeInfo,
    TopicMetadata,
    TopicSpec,
    clamp_config,
    topic_config_bounds,
)
from internal_rpc.messages import Answer, Request
from internal_rpc.server import RpcServer
from logbroker.at_rest import AtRest
from logbroker.auth.bootstrap import build_auth, node_limits
from logbroker.auth.groups import GroupAccess
from logbroker.auth.permissions import Principal
from logbroker.cluster_groups import ClusterTopics, offsets_log
from logbroker.cluster_metrics import ClusterHealthCollector
from logbroker.config import NodeConfig
from logbroker.crash_watch import CrashWatch
from logbroker.descriptors import PARTITIONS_MIN, DescriptorPlan, raise_open_files_limit
from logbroker.errors import (
    ANY_ERROR,
    InvalidRequestError,
    NoLeaderError,
    NotAClusterError,
    NotAvailableError,
    UnknownGroupError,
)
from logbroker.etcd_settings import etcd_coordinator, register_etcd_metrics
from logbroker.groups.coordinator import OFFSETS_PARTITIONS, OFFSETS_TOPIC, GroupCoordinator
from logbroker.groups.live import LiveGroups
from logbroker.internal_log import ensure_internal_topic
from logbroker.metering.metrics import UsageCollector
from logbroker.metering.recorder import UsageRecorder
from logbroker.metrics import Metrics
from logbroker.partition_moves import PartitionMover
from logbroker.peers import Peers
from logbroker.queue_hosting import DeadLetters, QueueHosting, check_queue_managed
from logbroker.queues.manager import QueueManager
from logbroker.read_path import ReadPath
from logbroker.reconciler import Reconciler
from logbroker.replica_manager import ReplicaManager
from logbroker.replication.manager import ReplicationManager
from logbroker.routing import Router
from logbroker.rpc_service import SERVICE, node_service, rpc_security
from logbroker.state_metrics import GroupQueueCollector
from logbroker.storage_health import free_bytes, total_bytes
from logbroker.storage_usage import RECOUNT_S as STORAGE_RECOUNT_S
from logbroker.storage_usage import StorageUsage
from logbroker.supervisor import run_supervised
from logbroker.topic_admin import TopicAdmin
from logbroker.topic_config_view import described_config
from logbroker.write_path import WritePath
from segments.config import LogConfig

log = logging.getLogger(__name__)
A = TypeVar("A", bound=Answer)  # the answer type of an internal RPC request
PEER_DEADLINE_S: Final = 10.0
DRAIN_S: Final = 2.0  # a clean stop gives in-sync followers the whole log for at most this long
ROUND_PAUSE_S: Final = 0.02  # between rounds of the reconcile and replication loops (each waits itself)
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
        # of ``logbroker.ports`` (decision 0360); the parts the protocols call (router, writes,
        # reads, topics, queue hosting) take collaborators and small callables, never the node (0393).
        self.replication = ReplicationManager(config, self.coordinator, self.replicas, self)
        self.router = Router(self.coordinator, self.replicas, self.replication, config.node_id, lambda: self.peers,
                             lambda: self._groups is not None)
        self.reconciler = Reconciler(self.coordinator, self.replication, self, config.node_id)
        self.moves = PartitionMover(self.coordinator, self.replicas, self, self.router.check_leads)
        self._reconcile_task: asyncio.Task[None] | None = None
        self._replication_task: asyncio.Task[None] | None = None
        self.ready = False
        self.kafka_address = ""  # the Kafka listener's advertised address (empty: none), set by ``start``
        self._maintenance: asyncio.Task[None] | None = None
        self._group_ticker: asyncio.Task[None] | None = None
        self._groups: GroupCoordinator | None = None
        # the epoch of the offsets log's leadership this node's groups were loaded under (a cluster):
        # groups loaded under an earlier leadership are stale once another node led in between
        self._groups_epoch: int | None = None
        self.storage = StorageUsage(self.coordinator, self.auth, self.replicas, self, config.node_id)
        self.writes = WritePath(config, self.coordinator, self.replicas, self.router, self.replication, self.moves,
                                self.storage, self.metrics, self.at_rest, self.log_config, self._check_serving)
        self.reads = ReadPath(config, self.coordinator, self.replicas, self.router, self.metrics, self.at_rest,
                              self._check_serving)
        dead_letters = DeadLetters(self.coordinator, self.auth, self.writes)
        self.queues = QueueManager(self.replicas, dead_letters.produce,
                                   on_withheld=self.metrics.count_withheld_dead_letters,
                                   check_managed=functools.partial(check_queue_managed, self.coordinator))
        self.queue_hosting = QueueHosting(config.node_id, self.coordinator, self.replicas, self.queues, dead_letters,
                                          self.base_log_config, self.take_up_leaderships, self.replication.led_epoch)
        self.topics = TopicAdmin(config.node_id, self.coordinator, self.replicas, self.replication, self.reconciler,
                                 self.queues, self.queue_hosting, self.reads, self.auth, self.at_rest,
                                 base_log_config=self.base_log_config, config_bounds=self.config_bounds,
                                 log_config=self.log_config, descriptors=lambda: self.descriptors,
                                 local_partitions=self.local_partitions, check_serving=self._check_serving)
        self.metrics.registry.register(GroupQueueCollector(lambda: self._groups, self.queues))
        self.metrics.registry.register(UsageCollector(lambda: self.auth.meter.ledger.totals))
        self.metrics.registry.register(ClusterHealthCollector(self.coordinator, self.replicas, self.replication,
                                                              self.reconciler, config.data_dir))
        self._storage_task: asyncio.Task[None] | None = None
        self.usage = UsageRecorder(self.auth.meter, self.coordinator, config.node_id, config.usage_retention_days,
                                   self.replicas.all, self.storage.payer_of)
        self._usage_task: asyncio.Task[None] | None = None
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
        await self.topics.finish_deletions()
        self.auth.start()
        await self._bootstrap_admin()
        if self.clustered:
            await self._start_cluster()
            return
        for meta in await self.coordinator.list_topics():
            await self.replicas.open_topic(meta, self.log_config(meta))
        offsets_log = await ensure_internal_topic(self.coordinator, self.replicas, OFFSETS_TOPIC, OFFSETS_PARTITIONS,
                                                  self.base_log_config)
        groups = GroupCoordinator(self.replicas, offsets_log)
        await groups.load()
        self._groups = groups
        for meta in await self.coordinator.list_topics():
            if meta.kind == "queue":
                await self.queue_hosting.open_queue(meta)
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
            groups = GroupCoordinator(self.replicas, log_, topics=ClusterTopics(self.coordinator, self.reads))
            started = time.perf_counter()
            records = await groups.load()  # shares the loop; its time is logged
            if self._groups_epoch_now() != epoch:  # the leadership changed meanwhile: the next pass loads afresh
                return
            self._groups, self._groups_epoch = groups, epoch
            log.info("coordinating consumer groups", extra={"fields": {
                "node": self.config.node_id, "epoch": epoch, "records_replayed": records,
                "load_ms": round((time.perf_counter() - started) * 1000, 1)}})

    async def reconcile_queues(self) -> None:
        """Manage exactly the queues this cluster node leads (``QueueHosting.reconcile``)."""
        await self.queue_hosting.reconcile()

    def topic_changed(self, topic: str) -> None:
        """The watch touched ``topic`` (its partition count may have changed)."""
        if self._groups is not None:
            self._groups.topic_changed(topic)

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

    async def drop_local_topic(self, name: str, topic_id: str) -> None:
        """Remove this node's data of a topic deleted elsewhere in the cluster."""
        log.info("dropping the data of a deleted topic", extra={"fields": {"topic": name}})
        self.queues.remove(name)
        await self.replicas.remove_topic(name, topic_id)
        self.replicas.purge_deleted(topic_id)

    def take_up_leaderships(self, topic: str) -> None:
        """Take up at once the leaderships of ``topic`` the cache gives this node (before the reconcile
        round does), so that an internal log is written at its leader epoch from the start."""
        for partition in self.local_partitions(topic):
            state = self.coordinator.cached_partition(topic, partition)
            if state is not None and state.leader == self.config.node_id:
                self.replication.reconcile_partition(state)

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
        return self.replication.led_epoch(OFFSETS_TOPIC, 0)

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
        service = node_service(self.config.node_id, self.router, self.writes, self.reads, self.moves, self.replication,
                               self.storage)
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
        if self.writes.background:
            await asyncio.wait(self.writes.background, timeout=self.config.shutdown_grace_ms / 1000)
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

    # ---- peers and placement -----------------------------------------------------------------

    async def peer_call(self, node_id: int, request: Request[A], *, deadline_s: float = PEER_DEADLINE_S) -> A:
        return await self.router.peers().call(node_id, request, deadline_s=deadline_s)

    async def peer_stream_call(self, node_id: int, request: Request[A], *, deadline_s: float = PEER_DEADLINE_S) -> A:
        return await self.router.peers().stream_call(node_id, request, deadline_s=deadline_s)

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
