"""Topic administration (``Node.topics``): create, grow, reconfigure, describe, list and delete
topics and queues. On a single node the logs are opened here as the metadata is written; on a
cluster the coordinator places the partitions, the watch carries them to every replica's node
(``Reconciler``), and a call answers once every partition has a leader (bounded).

Invariant: nothing is created beyond the node's descriptor budget (each partition keeps its
active segment open), one partition growth runs at a time, a queue's state log grows before the
queue does, and a deletion frees the space before it rewrites the metadata (a deletion cut short
is finished by the retry or by the next start, ``finish_deletions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from coordinator.errors import (
    CoordinatorError,
    CoordinatorUnavailableError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from coordinator.models import (
    DEAD_LETTER_ID_KEY,
    INTERNAL_PREFIX,
    MetadataChange,
    TopicMetadata,
    TopicSpec,
    check_partition_growth,
    validate_name,
)
from coordinator.topic_config import alter_config
from logbroker.errors import InvalidRequestError, NotLeaderError
from logbroker.internal_log import INTERNAL_LOG_CONFIG
from logbroker.partition_roles import NO_LEADER
from logbroker.queues.manager import state_topic
from logbroker.topic_config_view import described_config
from segments.errors import TooManyOpenFilesError

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.at_rest import AtRest
    from logbroker.auth.permissions import Principal
    from logbroker.auth.service import AuthService
    from logbroker.descriptors import DescriptorPlan
    from logbroker.queue_hosting import QueueHosting
    from logbroker.queues.manager import QueueManager
    from logbroker.read_path import ReadPath
    from logbroker.reconciler import Reconciler
    from logbroker.replica_manager import ReplicaManager
    from logbroker.replication.manager import ReplicationManager
    from segments.config import LogConfig

log = logging.getLogger(__name__)
LEADERS_WAIT_S: Final = 10.0
LEADERS_POLL_S: Final = 0.02


class TopicAdmin:
    """Takes this node's id, its coordinator, replicas, replication, ``Reconciler``, queue manager
    and ``QueueHosting``, the ``ReadPath`` (a describe's partition figures), auth (owners and
    visibility), encryption at rest, the base log config and its bounds, how a topic's log config
    is made, the descriptor plan (it changes at start), ``local_partitions`` and
    ``check_serving``; never the node."""

    def __init__(self, node_id: int, coordinator: Coordinator, replicas: ReplicaManager,
                 replication: ReplicationManager, reconciler: Reconciler, queues: QueueManager,
                 hosting: QueueHosting, reads: ReadPath, auth: AuthService, at_rest: AtRest, *,
                 base_log_config: LogConfig, config_bounds: dict[str, tuple[int, int]],
                 log_config: Callable[[TopicMetadata], LogConfig], descriptors: Callable[[], DescriptorPlan],
                 local_partitions: Callable[[str], list[int]], check_serving: Callable[[], None]) -> None:
        self._node_id = node_id
        self._coordinator = coordinator
        self._replicas = replicas
        self._replication = replication
        self._reconciler = reconciler
        self._queues = queues
        self._hosting = hosting
        self._reads = reads
        self._auth = auth
        self._at_rest = at_rest
        self._base_log_config = base_log_config
        self._config_bounds = config_bounds
        self._log_config = log_config
        self._descriptors = descriptors
        self._local_partitions = local_partitions
        self._check_serving = check_serving
        self._growing = asyncio.Lock()

    async def create_topic(self, body: object, *, owner: str | None = None) -> dict[str, Any]:
        """Create a topic or queue owned by ``owner``. A queue's dead-letter topic is created with it
        (owned by ``owner``) unless an explicit ``dead_letter_topic`` names an existing topic that
        ``owner`` may write to (else 403); either way the queue is bound to that topic's id."""
        self._check_serving()
        spec = TopicSpec.parse(body, base_config=self._base_log_config, bounds=self._config_bounds)
        self._at_rest.check_topic_config(spec.config)
        if self._coordinator.is_cluster:
            return await self._create_cluster_topic(spec, owner)
        dead_letter = spec.queue_settings().get("dead_letter_topic")
        existing = {t.name for t in await self._coordinator.list_topics()}
        if spec.name in existing:
            raise TopicExistsError(f"{spec.name!r} already exists")
        bound = await self._existing_dead_letter(spec, dead_letter, owner) if dead_letter in existing else None
        await self._check_partition_budget(spec.partitions * (2 if spec.kind == "queue" else 1)
                                           + (1 if dead_letter is not None and bound is None else 0))
        created = None
        if dead_letter is not None and bound is None:
            dlq = TopicSpec(dead_letter, 1, spec.replication_factor, "topic", {})
            bound = created = await self._coordinator.create_topic(dlq, owner)
            await self._replicas.open_topic(created, self._log_config(created))
        if bound is not None:
            spec = dataclasses.replace(spec, config={**spec.config, DEAD_LETTER_ID_KEY: bound.topic_id})
        try:
            meta = await self._coordinator.create_topic(spec, owner)
        except CoordinatorError:
            if created is not None:  # the queue lost a race for its name: its dead-letter topic goes too
                await self.delete_topic(created.name)
            raise
        await self._replicas.open_topic(meta, self._log_config(meta))
        if meta.kind == "queue":
            await self._hosting.open_queue(meta)
        return await self.describe_topic(spec.name)

    async def _create_cluster_topic(self, spec: TopicSpec, owner: str | None) -> dict[str, Any]:
        """Create a topic in the cluster: the coordinator places it; every replica's node opens its
        log when the watch shows it, and the candidates stand for leadership. Answers once every
        partition has a leader (or after ``LEADERS_WAIT_S``, leaders then shown as -1)."""
        if spec.kind == "queue":
            return await self._create_cluster_queue(spec, owner)
        await self._check_partition_budget(spec.partitions)
        meta = await self._coordinator.create_topic(spec, owner)
        self._reconciler.notice(MetadataChange(topics=frozenset({meta.name})))
        await self.await_leaders(meta.name)
        return await self.describe_topic(meta.name)

    async def _create_cluster_queue(self, spec: TopicSpec, owner: str | None) -> dict[str, Any]:
        """A queue on a cluster keeps all its partitions and its share-state log on one replica
        list, led preferably by the node that took its creation, so that its manager has both at
        hand and they fail over together (decision 0198); its dead-letter topic is placed like any
        topic. Queue calls reach the manager from any node."""
        await self._check_partition_budget(spec.partitions * 2 + 1)
        dead_letter = spec.queue_settings()["dead_letter_topic"]
        if self._coordinator.cached_topic(dead_letter) is not None:
            bound = await self._existing_dead_letter(spec, dead_letter, owner)
        else:
            bound = await self._coordinator.create_topic(TopicSpec(dead_letter, 1, None, "topic", {}), owner)
        spec = dataclasses.replace(spec, config={**spec.config, DEAD_LETTER_ID_KEY: bound.topic_id})
        meta = await self._coordinator.create_topic(spec, owner, on_node=self._node_id)
        flush = {k: v for k, v in meta.config.items() if k in ("flush", "flush_ms")}
        with contextlib.suppress(TopicExistsError):
            await self._coordinator.create_topic(
                TopicSpec(state_topic(meta), meta.partitions, None, "topic", {**INTERNAL_LOG_CONFIG, **flush}), None,
                replicas=self._hosting.queue_replicas(meta.name))
        for name in (dead_letter, meta.name, state_topic(meta)):
            self._reconciler.notice(MetadataChange(topics=frozenset({name})))
            await self.await_leaders(name)
        if not self._queues.has(meta.name) and self._hosting.leads_queue(meta):  # a reconcile round may have opened it
            with contextlib.suppress(NotLeaderError):  # it moved while it opened: its new leader's reconcile opens it
                await self._hosting.open_queue(meta)
        return await self.describe_topic(meta.name)

    async def await_leaders(self, name: str) -> None:
        """Wait (bounded) until this node's cache shows the topic and every partition has a
        leader. A topic the cache still does not show (its watch lags, e.g. right after etcd came
        back) is a retriable ``CoordinatorUnavailableError``: it was created all the same."""
        deadline = time.monotonic() + LEADERS_WAIT_S
        while time.monotonic() < deadline:
            try:
                states = await self._coordinator.partition_states(name)
            except UnknownTopicError:
                states = None
            if states is not None and all(s.leader != NO_LEADER for s in states):
                return
            await asyncio.sleep(LEADERS_POLL_S)
        if self._coordinator.cached_topic(name) is None:
            raise CoordinatorUnavailableError(f"{name!r} was created but this node's metadata does not show it yet")

    async def _existing_dead_letter(self, spec: TopicSpec, name: str, owner: str | None) -> TopicMetadata:
        """The existing topic ``name`` that a new queue names as its dead-letter topic, if it named
        it explicitly and ``owner`` may write to it (``ForbiddenError`` otherwise)."""
        if "dead_letter_topic" not in spec.config:
            # A user may create a topic named like another's future queue's dead-letter topic; the
            # queue's creator then picks another name (decision 0171).
            raise TopicExistsError(f"the dead letter topic {name!r} already exists; choose another with "
                                   "config.dead_letter_topic", field="config.dead_letter_topic")
        return await self._auth.authorize_owner(owner, name, "write")

    async def add_partitions(self, name: str, body: object) -> dict[str, Any]:
        """Raise a topic's or queue's partition count (``{"partitions": N}``); groups rebalance on
        their next check, and a queue's receivers take from the new partitions at once."""
        self._check_serving()
        validate_name(name, internal=True)
        if not isinstance(body, dict) or set(body) != {"partitions"}:
            raise InvalidRequestError('the body must be {"partitions": <new count>}')
        if name.startswith(INTERNAL_PREFIX):
            raise InvalidTopicError(f"{name!r} is internal: its partitions follow what it belongs to")
        if self._coordinator.is_cluster and (await self._coordinator.get_topic(name)).kind == "queue":
            raise InvalidTopicError("a queue on a cluster cannot gain partitions yet (it lives on one node)")
        async with self._growing:  # one growth at a time: each reads the counts it raises
            current = await self._coordinator.get_topic(name)
            partitions = check_partition_growth(current, body["partitions"])
            per_partition = 2 if current.kind == "queue" else 1  # a queue partition has a state partition
            await self._check_partition_budget((partitions - current.partitions) * per_partition)
            if current.kind == "queue":
                # The state log first: a state partition without its queue partition is harmless
                # (a later growth reuses it), the other way round would lose deliveries.
                await self._grow_queue_state(current, partitions)
            meta = await self._coordinator.add_partitions(name, partitions)
            if self._coordinator.is_cluster:
                self._reconciler.notice(MetadataChange(topics=frozenset({name})))
                await self.await_leaders(name)
                return await self.describe_topic(name)
            await self._replicas.open_topic(meta, self._log_config(meta))
            if meta.kind == "queue":
                self._queues.grow(meta, self._replicas.partitions(state_topic(meta)))
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
            merged = alter_config(current, changes, base_config=self._base_log_config, bounds=self._config_bounds)
            if isinstance(changes, dict):
                self._at_rest.check_topic_config(changes)
            return merged

        meta = await self._coordinator.set_topic_config(name, update)
        log.info("topic config changed", extra={"fields": {"topic": name, "config": dict(meta.config)}})
        self._replicas.reconfigure(name, self._log_config(meta))
        if meta.kind == "queue":
            self._queues.reconfigure(meta)
        if self._coordinator.is_cluster:
            self._reconciler.notice(MetadataChange(topics=frozenset({name})))
            for partition in self._local_partitions(name):
                state = self._coordinator.cached_partition(name, partition)
                if state is not None:
                    self._replication.reconcile_partition(state)
        return await self.describe_topic(name)

    async def _check_partition_budget(self, more: int) -> None:
        """Refuse, before anything is created, partitions beyond the node's descriptor budget: each
        keeps its active segment's file open (``logbroker.descriptors``)."""
        held = sum(meta.partitions for meta in await self._coordinator.list_topics())
        limit = self._descriptors().partitions_max
        if held + more > limit:
            raise TooManyOpenFilesError(
                f"the node holds {held} partitions and may hold {limit} (each keeps a file open; the limit follows "
                f"the process's descriptor limit, {self._descriptors().limit}): delete topics or raise `ulimit -n`")

    async def _grow_queue_state(self, queue: TopicMetadata, partitions: int) -> None:
        state = await self._coordinator.get_topic(state_topic(queue))
        if state.partitions < partitions:
            state = await self._coordinator.add_partitions(state.name, partitions)
        await self._replicas.open_topic(state, self._log_config(state))

    async def delete_topic(self, name: str) -> None:
        """Delete a topic (a queue with its state log). The space is freed before the metadata is
        rewritten, so that an operator can free a full disk this way (``ReplicaManager``); a
        deletion cut short is finished by the retry or by the next start."""
        self._check_serving()
        validate_name(name, internal=True)
        if name.startswith(INTERNAL_PREFIX):
            raise InvalidTopicError(f"{name!r} is internal: it goes with what it belongs to")
        meta = await self._coordinator.get_topic(name)
        doomed = [meta]
        if meta.kind == "queue":
            self._queues.remove(name)
            with contextlib.suppress(UnknownTopicError):
                doomed.append(await self._coordinator.get_topic(state_topic(meta)))
        for topic in doomed:
            self._replication.drop(topic.name)
            await self._replicas.remove_topic(topic.name, topic.topic_id)
        for topic in doomed:
            await self._coordinator.delete_topic(topic.name)
            self._replicas.purge_deleted(topic.topic_id)
            self._reconciler.forget(topic.name)

    async def finish_deletions(self) -> None:
        """Finish the topic deletions a previous run began (their space is already freed)."""
        pending = self._replicas.pending_deletions()
        if not pending:
            return
        for meta in await self._coordinator.list_topics():
            if meta.topic_id in pending:
                log.warning("finishing an interrupted topic deletion", extra={"fields": {"topic": meta.name}})
                await self._replicas.remove_topic(meta.name, meta.topic_id)  # directories not marked yet
                await self._coordinator.delete_topic(meta.name)
        for topic_id in pending:
            self._replicas.purge_deleted(topic_id)

    async def list_topics(self, principal: Principal, *, internal: bool = False) -> list[dict[str, Any]]:
        """The topics ``principal`` may see; the broker's own ``__`` topics only with ``internal``."""
        visible = await self._auth.visible(principal, await self._coordinator.list_topics())
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
        meta = await self._coordinator.get_topic(name)
        states = await self._coordinator.partition_states(name)
        figures = await self._reads.partition_figures(name, states) if offsets else {}
        unknown = dict.fromkeys(("earliest_offset", "latest_offset", "log_end_offset", "size_bytes")) if offsets else {}
        partitions = []
        for state in states:
            partitions.append({
                "partition": state.partition, "leader": state.leader, "leader_epoch": state.leader_epoch,
                "replicas": list(state.replicas), "in_sync_replicas": list(state.isr),
                "eligible_leader_replicas": list(state.elr), **figures.get(state.partition, unknown),
            })
        config = described_config(meta, self._log_config(meta), encrypted_by_default=self._at_rest.ring is not None)
        return {**self._summary(meta), "partition_count": meta.partitions, "partitions": partitions,
                "topic_id": meta.topic_id, "created_ms": meta.created_ms, "config": config}
