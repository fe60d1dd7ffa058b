"""Keeps a cluster node's partitions in line with the coordinator's metadata.

The coordinator's watch calls ``notice`` with what changed; one task (``run``) then, for each
touched topic: opens the logs of the partitions this node is a replica of, drops the data of a
topic that was deleted (or deleted and created again under a new id) elsewhere, and stands for
leadership where ``partition_roles`` says this node is the candidate; a replica opened after an
unclean shutdown first leaves the ISR (decision 0385) and stands only after that. A change of the node set
re-examines every topic (a dead leader's partitions need a new one). Work is coalesced: topics
touched many times while a pass runs are handled once in the next pass; a periodic pass repairs
anything a failed step left behind. A partition seen without a leader is looked at again each
``ELECTION_GRACE_MS``, so that the next eligible replica stands when the candidate does not take it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from coordinator.errors import CoordinatorError
from coordinator.models import INTERNAL_PREFIX, MetadataChange, PartitionState, TopicMetadata
from logbroker.partition_roles import ELECTION_GRACE_MS, NO_LEADER, eligible_alive, hosts, should_stand, topic_ranks

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.ports import PartitionHost
    from logbroker.replication.manager import ReplicationManager

log = logging.getLogger(__name__)
FULL_PASS_INTERVAL_S: Final = 5.0
ELECTIONS_PER_PASS_MAX: Final = 10_000


class Reconciler:
    def __init__(self, coordinator: Coordinator, replication: ReplicationManager, host: PartitionHost,
                 node_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        """``host``: the node, which opens and drops what it hosts; ``node_id``: its id."""
        self._clock = clock
        self._leaderless_since: dict[tuple[str, int], float] = {}  # first seen without a leader
        self._rechecks: dict[str, asyncio.TimerHandle] = {}  # at most one per topic
        self._coordinator = coordinator
        self._replication = replication
        self._host = host
        self._me = node_id
        self._pending: set[str] = set()
        self._everything = True
        self._wake = asyncio.Event()
        self._opened_ids: dict[str, str] = {}  # topic -> the id of the topic whose logs are open here
        self._racks: dict[int, str | None] = {}  # node -> rack, of the nodes the cluster knows
        self.session_losses = 0

    def notice(self, change: MetadataChange) -> None:
        self._pending.update(change.topics)
        if change.session_lost:
            self.session_losses += 1
            self._replication.session_lost()
        if change.nodes:
            self._replication.nodes_changed()
        if change.nodes or change.session_lost:
            self._everything = True
        self._wake.set()

    async def round(self) -> None:
        """One round of the supervised loop: wait for a change (or ``FULL_PASS_INTERVAL_S``, then
        re-examine everything) and reconcile."""
        try:
            await asyncio.wait_for(self._wake.wait(), FULL_PASS_INTERVAL_S)
        except TimeoutError:
            self._everything = True
        await self.reconcile_once()

    async def reconcile_once(self) -> None:
        """Reconcile what changed; a pass that fails midway leaves a full pass due."""
        try:
            await self._reconcile()
        except BaseException:
            self._everything = True
            raise

    async def _reconcile(self) -> None:
        self._wake.clear()
        coordinator = self._coordinator
        if self._everything:
            self._everything = False
            topics = {t.name for t in await coordinator.list_topics()} | set(self._opened_ids)
        else:
            topics = set()
        topics |= self._pending
        self._pending = set()
        members = await coordinator.cluster_nodes()
        alive = {n.info.node_id for n in members if n.alive}
        self._racks = {n.info.node_id: n.info.rack for n in members}
        elections: list[Callable[[], Awaitable[object]]] = []
        for name in sorted(topics, key=lambda n: (n.startswith(INTERNAL_PREFIX), n)):  # a queue before its state
            self._host.topic_changed(name)
            try:
                elections.extend(await self._reconcile_topic(name, alive))
            except (CoordinatorError, OSError) as exc:
                log.warning("reconcile failed; retried", extra={"fields": {"topic": name, "error": str(exc)}})
                self._pending.add(name)
        for elect in elections[:ELECTIONS_PER_PASS_MAX]:
            try:
                await elect()
            except CoordinatorError as exc:
                log.warning("election failed; retried", extra={"fields": {"error": str(exc)}})
                self._everything = True
        if elections:
            self._wake.set()  # a won election shows in the watch: look again at once
        await self._host.reconcile_groups()
        await self._host.reconcile_queues()

    async def _reconcile_topic(self, name: str, alive: set[int]) -> list[Callable[[], Awaitable[object]]]:
        coordinator, replication, host = self._coordinator, self._replication, self._host
        meta = coordinator.cached_topic(name)
        opened = self._opened_ids.get(name)
        if opened is not None and (meta is None or meta.topic_id != opened):
            replication.drop(name)
            await host.drop_local_topic(name, opened)
            del self._opened_ids[name]
        if meta is None:
            self.forget(name)
            return []
        me = self._me
        states = await coordinator.partition_states(name)
        hosted = [s.partition for s in states if hosts(s, me)]
        if hosted:
            await host.open_hosted(meta, hosted)
            self._opened_ids[name] = meta.topic_id
        if opened is not None or hosted:
            moved = [p for p in host.local_partitions(name) if p not in hosted]
            if moved:
                replication.drop(name, moved)
                await host.drop_moved(name, moved)
        for state in states:  # read again: the awaits above may have let the cache move on
            fresh = coordinator.cached_partition(name, state.partition)
            if fresh is not None and hosts(fresh, me):
                replication.reconcile_partition(fresh)
        ranks = topic_ranks(meta.config, self._racks)
        waited = self._leaderless_ms(name, states, alive, ranks)
        steps: list[Callable[[], Awaitable[object]]] = []
        for state in states:
            if hosts(state, me) and replication.unclean_start(name, state.partition):
                steps.append(functools.partial(self._withdraw, meta, state.partition, alive, ranks))
            elif should_stand(state, me, alive, ranks, waited.get(state.partition, 0)):
                steps.append(_election(coordinator, meta, state.partition))
        return steps

    async def _withdraw(self, meta: TopicMetadata, partition: int, alive: set[int],
                        ranks: dict[int, int] | None) -> None:
        """Leave the partition's ISR after an unclean shutdown, then stand if this node is the
        candidate still (the last eligible replica: nothing changed, and no watch event will
        come), in the same pass, so that a restarted node leads what only it can lead before
        it serves. (A cache that has not seen the withdrawal yet cannot win: the election is
        guarded by the record's revision.)"""
        await self._replication.withdraw(meta.name, partition)
        state = self._coordinator.cached_partition(meta.name, partition)
        if state is not None and should_stand(state, self._me, alive, ranks):
            await _election(self._coordinator, meta, partition)()
        self._pending.add(meta.name)

    def _leaderless_ms(self, name: str, states: list[PartitionState], alive: set[int],
                       ranks: dict[int, int] | None) -> dict[int, int]:
        """How long each of ``name``'s leaderless partitions has been seen so. When another live
        eligible replica could stand in, a look again is due as the grace period ends
        (``partition_roles.candidate``)."""
        now = self._clock()
        waited: dict[int, int] = {}
        next_in_ms: int | None = None
        for state in states:
            key = (name, state.partition)
            if state.leader != NO_LEADER:
                self._leaderless_since.pop(key, None)
                continue
            ms = waited[state.partition] = int((now - self._leaderless_since.setdefault(key, now)) * 1000)
            if len(eligible_alive(state, alive, ranks)) > 1:
                due = ELECTION_GRACE_MS - ms % ELECTION_GRACE_MS
                next_in_ms = due if next_in_ms is None else min(next_in_ms, due)
        if next_in_ms is not None:
            self._recheck(name, next_in_ms / 1000)
        return waited

    def _recheck(self, name: str, delay_s: float) -> None:
        held = self._rechecks.pop(name, None)
        if held is not None:
            held.cancel()
        self._rechecks[name] = asyncio.get_running_loop().call_later(delay_s, self._look_again, name)

    def _look_again(self, name: str) -> None:
        self._rechecks.pop(name, None)
        self._pending.add(name)
        self._wake.set()

    def forget(self, name: str) -> None:
        """This node deleted ``name`` itself (or it is gone): its logs are gone already."""
        self._opened_ids.pop(name, None)
        held = self._rechecks.pop(name, None)
        if held is not None:
            held.cancel()
        for key in [k for k in self._leaderless_since if k[0] == name]:
            del self._leaderless_since[key]


def _election(coordinator: Coordinator, meta: TopicMetadata, partition: int) -> Callable[[], Awaitable[object]]:
    async def elect() -> object:
        won = await coordinator.elect(meta.name, partition)
        if won is not None:
            log.info("leading", extra={"fields": {"topic": meta.name, "partition": partition,
                                                  "leader_epoch": won.leader_epoch}})
        return won
    return elect
