"""A cluster node's replication (DESIGN §6): which partitions it leads and at which epoch, the
shippers to its followers, the ISR it maintains, the failback to preferred leaders, and the
follower side of shipments.

Roles follow the coordinator's cache: ``reconcile_partition`` (called by ``Reconciler`` for every
hosted partition, after each watch event) starts a ``Leadership`` when the cache names this node
leader at an epoch it does not lead yet, and ends it when the cache names another node or a newer
epoch. A follower needs no state of its own here: its leader aligns it (truncation) and ships to it.

``tick`` (every ``TICK_S``, or sooner when a silent follower's stall time is up before: ``stall_due``)
applies the ISR rules of ``partition_state`` with this node's clock:
a follower that is dead or lags more than ``replica_lag_ms`` leaves the ISR, and so does one that
lacks an ``acks=all`` write waiting longer than ``replica_stall_ms`` and has answered nothing
meanwhile, while ``min_insync_replicas`` members remain (a crashed, paused or cut-off follower
stops writes for about that long, not for its lease); one that has caught up joins it, each
change a guarded coordinator transaction at this leader's epoch; and once the preferred replica
is back in sync with the whole log, this node stops taking writes for the partition and resigns,
so that the preferred replica is elected (failback).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from coordinator.eligibility import after_isr_change
from coordinator.errors import CoordinatorError, StaleEpochError
from coordinator.models import PartitionState
from internal_rpc.messages import ReplicateAnswer, ReplicateRequest, ShipmentResult
from logbroker.errors import NotLeaderError
from logbroker.partition_roles import topic_ranks
from logbroker.partition_state import (
    HAND_OVER_ABANDON,
    HAND_OVER_READY,
    UNKNOWN,
    failback_target,
    hand_over,
    may_begin_hand_over,
    min_insync_replicas,
    out_of_sync,
    ready_to_join,
    stall_due,
    stalling,
)
from logbroker.replica_manager import Replica
from logbroker.replication.follower import FollowerSide
from logbroker.replication.leader import Leadership, now_ms
from logbroker.replication.shipper import ShipmentCounts, Shipper
from segments.errors import StorageError
from segments.log import AppendInfo

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.config import NodeConfig
    from logbroker.ports import LocalReplicas, PeerTransport

log = logging.getLogger(__name__)
TICK_S: Final = 0.2
STALL_ROUND_MIN_S: Final = 0.01  # the shortest wait before a round brought forward for a stall
HAND_OVER_WAIT_S: Final = 3.0
FAILBACK_DELAY_MS: Final = 1_000  # the preferred replica must be in the ISR this long first
FAILBACK_FRESH_MS: Final = 400  # a hand-over begins only when every ISR follower answered this recently
# ... and no acks=all write has waited longer than half that (a follower may have stopped); like
# the freshness window it takes the round trip between the replicas to be well under it.
HAND_OVER_WAITING_MAX_MS: Final = FAILBACK_FRESH_MS // 2
LOST_MAX: Final = 100_000
SHIP_DEADLINE_S: Final = 5.0


class ReplicationManager:
    def __init__(self, config: NodeConfig, coordinator: Coordinator, replicas: LocalReplicas,
                 peers: PeerTransport) -> None:
        self._config = config
        self._coordinator = coordinator
        self._replicas = replicas
        self._peers = peers
        self.leaderships: dict[tuple[str, int], Leadership] = {}
        self._shippers: dict[int, Shipper] = {}
        self.shipped: dict[int, ShipmentCounts] = {}  # follower -> what went there; kept when its shipper goes
        self._changing: set[asyncio.Task[None]] = set()
        self._in_sync_since: dict[tuple[str, int], int] = {}
        self.next_round_s = TICK_S  # until the next upkeep round: shorter when a silent follower's time is nearly up
        self._lost: dict[tuple[str, int], int] = {}  # the epochs led when the session was lost
        self._registrations: dict[int, int] = {}  # follower -> the started_ms of its registration last seen
        self.follower = FollowerSide(self._replica_of, self._known_epoch, self._led_epoch, self._on_newer_leader)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leaderships_started = 0
        self.leaderships_ended = 0

    @property
    def _me(self) -> int:
        return self._config.node_id

    # ---- roles ------------------------------------------------------------------------------

    def leadership(self, topic: str, partition: int) -> Leadership | None:
        return self.leaderships.get((topic, partition))

    def led_epoch(self, topic: str, partition: int) -> int | None:
        """The epoch this node leads the partition at now (None: it does not)."""
        leadership = self.leaderships.get((topic, partition))
        return None if leadership is None or leadership.closed else leadership.epoch

    def reconcile_partition(self, state: PartitionState) -> None:
        """Take up, update or end this node's leadership of ``state``'s partition."""
        key = (state.topic, state.partition)
        current = self.leaderships.get(key)
        if current is not None and state.leader_epoch < current.epoch:
            return  # an older view than the one this leadership came from
        if state.leader == self._me and state.leader_epoch <= self._lost.get(key, -1):
            return  # the leadership this node held when its session was lost: not proven again
        if state.leader != self._me or not self._replicas.hosts(*key):
            if current is not None:
                self._end(current, "another node leads" if state.leader >= 0 else "no leader now")
            return
        min_insync = self._min_insync(state.topic)
        if current is not None and current.epoch == state.leader_epoch and not current.closed:
            known = set(current.followers)
            current.update(state, min_insync)
            for follower in current.followers:
                if follower not in known:
                    self._shipper(follower).wake()
            return
        if current is not None:
            self._end(current, "a new epoch")
        replica = self._replicas.get(*key)
        leadership = Leadership(replica, state, self._me, min_insync, self._fenced)
        self.leaderships[key] = leadership
        self.leaderships_started += 1
        timeout_s = self._config.replication_timeout_ms / 1000
        replica.epoch = state.leader_epoch
        replica.leader_hook = lambda _replica: leadership.recompute()
        replica.ack_wait = lambda end: leadership.wait_committed(end, timeout_s)
        self.follower.forget(*key)
        for follower in leadership.followers:
            self._shipper(follower).wake()
        leadership.recompute()
        log.info("leading partition", extra={"fields": {"topic": state.topic, "partition": state.partition,
                                                         "leader_epoch": state.leader_epoch, "isr": list(state.isr)}})

    def unclean_start(self, topic: str, partition: int) -> bool:
        """This node's replica of the partition was opened after an unclean shutdown and has not
        withdrawn from the ISR yet (it must not stand meanwhile: decision 0385)."""
        return self._replicas.hosts(topic, partition) and self._replicas.get(topic, partition).unclean_start

    async def withdraw(self, topic: str, partition: int) -> None:
        """Take this node's replica, opened after an unclean shutdown, out of the ISR and ELR
        while another replica stays eligible; it rejoins once caught up, as any follower."""
        state = await self._coordinator.withdraw(topic, partition)
        if self._replicas.hosts(topic, partition):
            self._replicas.get(topic, partition).unclean_start = False
        if state is not None:
            log.info("left the ISR after an unclean shutdown", extra={"fields": {
                "topic": topic, "partition": partition, "isr": list(state.isr), "elr": list(state.elr)}})
            return
        current = self._coordinator.cached_partition(topic, partition)
        if current is not None and (self._me in current.isr or self._me in current.elr):
            log.warning("the last eligible replica restarted after an unclean shutdown: it stays eligible and may "
                        "lack records it acknowledged", extra={"fields": {"topic": topic, "partition": partition}})

    def drop(self, topic: str, partitions: list[int] | None = None) -> None:
        """The partitions (None: every one) of ``topic`` left this node."""
        for key, leadership in list(self.leaderships.items()):
            if key[0] == topic and (partitions is None or key[1] in partitions):
                self._end(leadership, "the partition left this node")
        self.follower.forget(topic)

    def session_lost(self) -> None:
        """The node's coordinator session was lost: its leader keys went with its lease, so every
        leadership ends; one is taken up again only at a newer epoch (a new election)."""
        for key, leadership in list(self.leaderships.items()):
            self._lost[key] = leadership.epoch
            self._end(leadership, "the coordinator session was lost")
        if len(self._lost) > LOST_MAX:
            self._lost.clear()

    def nodes_changed(self) -> None:
        """A node joined, left or registered again: the shippers try their followers at once
        (one that was cut off rejoins the ISR without waiting out a backoff)."""
        for shipper in self._shippers.values():
            shipper.hurry()

    def _end(self, leadership: Leadership, reason: str) -> None:
        if self.leaderships.get(leadership.key) is leadership:
            del self.leaderships[leadership.key]
            self._in_sync_since.pop(leadership.key, None)
        if not leadership.closed:
            leadership.close(reason)
            self.leaderships_ended += 1
            log.info("no longer leading partition", extra={"fields": {
                "topic": leadership.key[0], "partition": leadership.key[1], "leader_epoch": leadership.epoch,
                "reason": reason}})

    def appended(self, leadership: Leadership) -> None:
        """The leader appended to ``leadership``'s partition: ship it."""
        for follower in leadership.followers:
            self._shipper(follower).wake()

    def _min_insync(self, topic: str) -> int:
        meta = self._coordinator.cached_topic(topic)
        if meta is None:
            return 1
        return min_insync_replicas(meta.config, meta.replication_factor)

    def _fenced(self) -> bool:
        return time.monotonic() >= self._coordinator.lease_valid_until()

    # ---- shipping ---------------------------------------------------------------------------

    def _shipper(self, follower: int) -> Shipper:
        shipper = self._shippers.get(follower)
        if shipper is None:
            shipper = Shipper(follower, self._led_for, self._call, self._topic_id, self._on_stale,
                              self.shipped.setdefault(follower, ShipmentCounts()))
            self._shippers[follower] = shipper
            shipper.start()
        return shipper

    def _led_for(self, follower: int) -> list[Leadership]:
        return [lead for lead in self.leaderships.values() if follower in lead.followers]

    async def _call(self, follower: int, request: ReplicateRequest) -> ReplicateAnswer:
        return await self._peers.peer_stream_call(follower, request, deadline_s=SHIP_DEADLINE_S)

    def _topic_id(self, topic: str) -> str | None:
        meta = self._coordinator.cached_topic(topic)
        return None if meta is None else meta.topic_id

    def _on_stale(self, leadership: Leadership, epoch: int) -> None:
        self._end(leadership, f"a follower knows epoch {epoch}")

    # ---- the follower's side ----------------------------------------------------------------

    async def replicate(self, request: ReplicateRequest) -> ReplicateAnswer:
        """The ``Replicate`` RPC: apply each entry, make it durable as the topic's flush policy
        wants, then answer each entry's log end."""
        results: list[ShipmentResult] = []
        durable: dict[int, tuple[Replica, list[int]]] = {}
        for index, entry in enumerate(request.entries):
            try:
                answer, replica = self.follower.apply(entry)
            except StorageError as exc:  # this partition only: the others of the call go on
                log.warning("shipment not stored", extra={"fields": {
                    "topic": entry.topic, "partition": entry.partition, "error": str(exc)}})
                answer, replica = ShipmentResult(error="storage_error"), None
            results.append(answer)
            if replica is not None:
                durable.setdefault(id(replica), (replica, []))[1].append(index)
        for replica, indexes in durable.values():
            end = replica.log.log_end_offset
            try:
                if replica.log.config.flush == "always" and end > replica.local_end:
                    await replica.make_durable(AppendInfo(end - 1, end - 1, end))
            except (StorageError, NotLeaderError):
                for index in indexes:
                    results[index] = ShipmentResult(error="storage_error")
                continue
            replica.copied(end)
        return ReplicateAnswer(results=results)

    def _replica_of(self, topic: str, partition: int, topic_id: str) -> Replica | None:
        meta = self._coordinator.cached_topic(topic)
        if meta is None or meta.topic_id != topic_id or not self._replicas.hosts(topic, partition):
            return None
        return self._replicas.get(topic, partition)

    def _known_epoch(self, topic: str, partition: int, topic_id: str) -> int:
        meta = self._coordinator.cached_topic(topic)
        state = self._coordinator.cached_partition(topic, partition)
        return -1 if state is None or meta is None or meta.topic_id != topic_id else state.leader_epoch

    def _led_epoch(self, topic: str, partition: int) -> int | None:
        leadership = self.leaderships.get((topic, partition))
        return None if leadership is None else leadership.epoch

    def _on_newer_leader(self, topic: str, partition: int, epoch: int) -> None:
        leadership = self.leaderships.get((topic, partition))
        if leadership is not None:
            self._end(leadership, f"a leader of epoch {epoch} ships to this node")

    # ---- ISR and failback -------------------------------------------------------------------

    async def tick(self) -> None:
        """One round of ISR upkeep and failback over every leadership (the supervised loop)."""
        await asyncio.sleep(self.next_round_s)
        coordinator = self._coordinator
        lag_ms = self._config.replica_lag_ms
        stall_ms = self._config.replica_stall_ms
        self.forget_restarted()
        at = now_ms()
        next_stall: int | None = None
        for leadership in list(self.leaderships.values()):
            if leadership.closed or leadership.isr_changing or leadership.handing_over:
                continue
            alive = [n for n in leadership.replicas if n == self._me or coordinator.cached_node(n) is not None]
            end = leadership.replica.log.log_end_offset
            for progress in leadership.followers.values():
                if progress.log_end is not None and progress.log_end >= end:
                    progress.caught_up_ms = at
            drop = out_of_sync(leadership.isr, self._me, leadership.followers, alive, at, lag_ms)
            waiting = leadership.oldest_waiting()
            stalled = stalling(leadership.isr, self._me, leadership.followers, waiting, at, stall_ms,
                               leadership.min_insync)
            due = stall_due(leadership.isr, self._me, leadership.followers, waiting, at, stall_ms)
            if due is not None and (next_stall is None or due < next_stall):
                next_stall = due
            drop += [n for n in stalled if n not in drop]
            join = ready_to_join(leadership.replicas, leadership.isr, leadership.followers, alive,
                                 leadership.replica.high_watermark, leadership.epoch_start)
            if drop or join or (leadership.elr and len(leadership.isr) >= leadership.min_insync):
                leadership.joining = tuple(join)
                leadership.recompute()
                self._spawn(self._change_isr(leadership, drop, join))
                continue
            target = failback_target(leadership.replicas, leadership.isr, self._me, alive,
                                     self._ranks(leadership.key[0], leadership.replicas))
            if target is not None:
                since = self._in_sync_since.setdefault(leadership.key, at)
                if at - since >= FAILBACK_DELAY_MS:
                    self._begin_failback(leadership, target, at, stall_ms)
            else:
                self._in_sync_since.pop(leadership.key, None)
        # A follower that falls silent under a waiting write is judged when its time is up, not a round later.
        self.next_round_s = TICK_S if next_stall is None else min(
            TICK_S, max(STALL_ROUND_MIN_S, (next_stall - at) / 1000))
        followed = {node for leadership in self.leaderships.values() for node in leadership.followers}
        for node in [n for n in self._shippers if n not in followed]:  # no partition ships there any more
            await self._shippers.pop(node).close()

    def forget_restarted(self) -> None:
        """A follower registered by another process than before (it restarted, and may hold less
        than it last answered: an unclean restart loses its unflushed tail) has its log end asked
        again before it may rejoin an ISR: what this leader heard from the old process is
        forgotten (decision 0385). A session re-registered by the same process keeps it."""
        followed = {node for leadership in self.leaderships.values() for node in leadership.followers}
        for node in followed:
            info = self._coordinator.cached_node(node)
            if info is None:
                continue
            seen = self._registrations.get(node)
            self._registrations[node] = info.started_ms
            if seen is None or seen == info.started_ms:
                continue
            for leadership in self.leaderships.values():
                progress = leadership.followers.get(node)
                if progress is not None:
                    progress.log_end = None  # the next shipment aligns it (asks where its log ends)
            self._shipper(node).wake()

    def _ranks(self, topic: str, replicas: tuple[int, ...]) -> dict[int, int] | None:
        """The replicas' ranks under the topic's ``leader_racks`` (None: no preference)."""
        meta = self._coordinator.cached_topic(topic)
        if meta is None:
            return None
        racks = {}
        for node in replicas:
            info = self._coordinator.cached_node(node)
            racks[node] = (self._config.rack or None) if node == self._me else (info.rack if info else None)
        return topic_ranks(meta.config, racks)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._changing.add(task)
        task.add_done_callback(self._changing.discard)

    async def _change_isr(self, leadership: Leadership, drop: list[int], join: list[int]) -> None:
        topic, partition = leadership.key
        isr, elr = after_isr_change(leadership.replicas, leadership.isr, leadership.elr, drop, join, self._me,
                                    leadership.min_insync)
        leadership.isr_changing = True
        try:
            state = await self._coordinator.set_isr(topic, partition, leadership.epoch, isr, elr,
                                                    based_on=(leadership.isr, leadership.elr))
        except StaleEpochError:
            self._end(leadership, "the coordinator has a newer epoch")
            return
        except CoordinatorError as exc:
            leadership.joining = ()
            log.warning("ISR change failed; retried", extra={"fields": {"topic": topic, "partition": partition,
                                                                          "error": str(exc)}})
            return
        finally:
            leadership.isr_changing = False
        self.isr_shrinks += bool(drop)
        self.isr_expands += bool(join)
        log.info("ISR changed", extra={"fields": {"topic": topic, "partition": partition, "isr": list(isr),
                                                   "elr": list(elr), "left": drop, "joined": join}})
        if not leadership.closed:
            leadership.update(state, leadership.min_insync)

    def _begin_failback(self, leadership: Leadership, target: int, at: int, silent_ms: int) -> None:
        """Start handing leadership to ``target`` when it and every other ISR follower answer now
        and no ``acks=all`` write has waited past a healthy round trip (``may_begin_hand_over``);
        else ask them all for a round trip (an idle partition ships nothing; all at once, so that
        their answers are fresh together) and look again next round, writes going on."""
        members = {n: leadership.followers.get(n) for n in (target, *leadership.isr) if n != self._me}
        waiting = leadership.oldest_waiting()
        if may_begin_hand_over(list(members.values()), at, FAILBACK_FRESH_MS,
                               None if waiting is None else waiting[1], HAND_OVER_WAITING_MAX_MS):
            self._spawn(self._fail_back(leadership, target, silent_ms))
            return
        for node, progress in members.items():
            if progress is not None:
                progress.high_watermark_sent = UNKNOWN  # the next shipment carries an entry it answers
                self._shipper(node).wake()

    async def _fail_back(self, leadership: Leadership, preferred: int, silent_ms: int) -> None:
        """Hand leadership to ``preferred`` (the preferred replica, or one in a better-ranked
        leader rack): refuse new writes, let it take the whole log and answer once more, then
        resign (it is then the election's candidate, ``partition_roles.candidate``). A target
        silent for ``silent_ms`` meanwhile is given up (``partition_state.hand_over``)."""
        topic, partition = leadership.key
        leadership.handing_over = True
        began = now_ms()
        deadline = time.monotonic() + HAND_OVER_WAIT_S
        first = leadership.followers.get(preferred)
        if first is not None:
            first.high_watermark_sent = UNKNOWN  # a round trip that began after the writes stopped
        try:
            while time.monotonic() < deadline:
                if leadership.closed:
                    return
                end = leadership.replica.log.log_end_offset
                others = [leadership.followers.get(n) for n in leadership.isr if n not in (self._me, preferred)]
                stands = hand_over(leadership.followers.get(preferred), end, leadership.replica.high_watermark,
                                   began, now_ms(), silent_ms,
                                   [p for p in others if p is None or p.log_end is None or p.log_end < end])
                if stands == HAND_OVER_READY:
                    break
                if stands == HAND_OVER_ABANDON:
                    # The refused writes waited as an acks=all write does: the stall rule counts
                    # from the hand-over's start, so a silent member leaves at the next round.
                    leadership.held_since_ms = began
                    log.info("failback abandoned: a replica did not answer", extra={"fields": {
                        "topic": topic, "partition": partition, "preferred": preferred}})
                    return
                self._shipper(preferred).wake()
                await asyncio.sleep(0.01)
            else:
                return
            await self._coordinator.resign(topic, partition)
            self._end(leadership, "handed back to the preferred replica")
            log.info("leadership handed back to the preferred replica", extra={"fields": {
                "topic": topic, "partition": partition, "preferred": preferred}})
        except CoordinatorError as exc:
            # The resignation may have committed: stop leading here either way (the reconcile rounds
            # take the leadership up again if the leader key is still this node's).
            self._end(leadership, "a resignation whose outcome is unknown")
            log.warning("failback failed; retried", extra={"fields": {"topic": topic, "error": str(exc)}})
        finally:
            self._in_sync_since.pop(leadership.key, None)
            leadership.handing_over = False

    async def drain(self, timeout_s: float) -> None:
        """Before a clean stop: take no more writes as leader and give the in-sync followers the
        whole log (bounded), so that whoever leads next has every record, ``acks=1`` ones too."""
        for leadership in self.leaderships.values():
            leadership.handing_over = True
            for follower in leadership.followers:
                self._shipper(follower).wake()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(self._behind(lead) for lead in self.leaderships.values()):
            await asyncio.sleep(0.01)

    def _behind(self, leadership: Leadership) -> bool:
        end = leadership.replica.log.log_end_offset
        alive = self._coordinator.cached_node
        return any(node != self._me and alive(node) is not None and (
            (p := leadership.followers.get(node)) is None or p.log_end is None or p.log_end < end)
            for node in leadership.isr)

    async def close(self) -> None:
        for leadership in list(self.leaderships.values()):
            self._end(leadership, "the node is stopping")
        for task in list(self._changing):
            task.cancel()
        shippers, self._shippers = list(self._shippers.values()), {}
        for shipper in shippers:
            await shipper.close()
