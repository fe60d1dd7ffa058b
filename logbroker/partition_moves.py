"""Moving partitions between nodes (rebalance, decommission) without losing a record.

Replication does the copying: a move that changes the leader hands leadership over only once
the new node is in the ISR and holds every record the old leader appended:

1. the replica list grows to include the target, the old leader first (it stays the candidate);
   the target opens an empty log, the leader ships the partition to it, and it joins the ISR
   once caught up (``logbroker.replication``);
2. the leader freezes the partition: it acknowledges no more writes to it (503 ``not_leader``,
   retriable) and waits until everything it appended is below its high watermark, so every
   in-sync replica, the target among them, holds it all;
3. one coordinator transaction sets the final replicas and ISR (the target first) and clears
   the leader key; the target is then the first live in-sync replica and is elected (epoch + 1).
   The old leader drops its copy when the watch shows it is no longer a replica.

A failure before step 3 thaws the leader (a freeze also lapses by itself after
``FREEZE_TTL_S``) and leaves leadership where it was. A move that keeps the leader (only
followers change) is a plain reassignment. Clients see a short window of retriable 503s on the
moving partition and nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from coordinator.errors import StaleEpochError
from coordinator.leader_racks import leader_racks
from coordinator.models import INTERNAL_PREFIX
from coordinator.placement import PlacementNode, decommission, rebalance
from internal_rpc.messages import FreezeRequest, ThawRequest
from logbroker.errors import ANY_ERROR, InvalidRequestError, NoLeaderError, NotAvailableError
from logbroker.partition_machine import ms_of
from logbroker.partition_roles import NO_LEADER

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.ports import LocalReplicas, PeerTransport

log = logging.getLogger(__name__)
CATCH_UP_DEADLINE_S: Final = 600.0
FREEZE_TTL_S: Final = 30.0
HAND_OVER_MARGIN_S: Final = 8.0  # the hand-over starts no later than this before the freeze lapses
DRAIN_WAIT_S: Final = 10.0
POLL_S: Final = 0.02
MOVES_PER_CALL_MAX: Final = 10_000
MOVES_AT_ONCE: Final = 16  # partitions catching up at the same time


class PartitionMover:
    def __init__(self, coordinator: Coordinator, replicas: LocalReplicas, peers: PeerTransport,
                 check_leads: Callable[[str, int], None]) -> None:
        """``check_leads``: refuses (``NotLeaderError``) a partition this node does not lead now."""
        self._coordinator = coordinator
        self._replicas = replicas
        self._peers = peers
        self._check_leads = check_leads
        self._frozen: dict[tuple[str, int], float] = {}  # (topic, partition) -> monotonic expiry
        self._moving = asyncio.Lock()  # one rebalance or decommission at a time here, and in the cluster

    # ---- the leader's side -----------------------------------------------------------------

    def frozen_until_ms(self, topic: str, partition: int, now_ms: int) -> int | None:
        """When the freeze of ``partition`` lapses (``time.monotonic()`` in ms), or None when it is
        not frozen at ``now_ms`` (a lapsed freeze is forgotten). The write gate reads it."""
        expiry = self._frozen.get((topic, partition))
        if expiry is None:
            return None
        until = ms_of(expiry, up=True)
        if now_ms >= until:
            del self._frozen[(topic, partition)]
            return None
        return until

    async def freeze(self, topic: str, partition: int, ttl_s: float) -> int:
        """Stop acknowledging writes to a partition this node leads, wait until what it appended
        is exposed, and return its log end (the move's last offset)."""
        self._check_leads(topic, partition)
        self._frozen[(topic, partition)] = time.monotonic() + min(max(ttl_s, 0.1), FREEZE_TTL_S)
        replica = self._replicas.get(topic, partition)
        deadline = time.monotonic() + DRAIN_WAIT_S
        while replica.high_watermark < replica.log.log_end_offset:
            if time.monotonic() >= deadline:
                self.thaw(topic, partition)
                raise NotAvailableError(f"partition {partition} of {topic!r}: appended records not committed in time")
            await asyncio.sleep(POLL_S)
        return replica.log.log_end_offset

    def thaw(self, topic: str, partition: int) -> None:
        self._frozen.pop((topic, partition), None)

    # ---- the controller's side (the node that took the admin call) ---------------------------

    async def move(self, topic: str, partition: int, target: tuple[int, ...]) -> dict[str, Any]:
        """Give ``partition`` the replica list ``target`` (preferred leader first)."""
        coordinator = self._coordinator
        state = coordinator.cached_partition(topic, partition)
        if state is None:
            raise InvalidRequestError(f"unknown partition {topic}/{partition}")
        leader = state.leader
        if leader == NO_LEADER:
            raise NoLeaderError(f"partition {partition} of {topic!r} has no leader to move it from")
        moved = {"topic": topic, "partition": partition, "from": list(state.replicas), "to": list(target),
                 "leader_from": leader, "leader_to": target[0]}
        if target[0] == leader:
            await coordinator.reassign(topic, partition, target)
            return moved
        new = target[0]
        interim = (leader, *[n for n in target if n != leader])
        await coordinator.reassign(topic, partition, interim)
        try:
            await self._await_in_sync(topic, partition, new)
            await self._peers.peer_call(leader, FreezeRequest(topic=topic, partition=partition, ttl_s=FREEZE_TTL_S))
        except BaseException:
            await self._undo(topic, partition, leader, state.replicas, thaw=False)
            raise
        in_sync = coordinator.cached_partition(topic, partition)
        if in_sync is None or new not in in_sync.isr:  # it left the ISR during the freeze: it may lack the tail
            await self._undo(topic, partition, leader, state.replicas, thaw=True)
            raise NotAvailableError(f"node {new} left the ISR of partition {partition} of {topic!r} during the "
                                    "move; not handed over")
        isr = (new, *[n for n in target[1:] if n in in_sync.isr])
        try:
            # Bounded so that it ends before the freeze can lapse; shielded so that a cancelled
            # request does not leave its outcome unknown to the transaction itself.
            async with asyncio.timeout(HAND_OVER_MARGIN_S - 1.0):
                await asyncio.shield(coordinator.hand_over(topic, partition, target, isr, leader,
                                                           expected=interim))
        except StaleEpochError:  # the guard failed: nothing changed (someone else changed the
            # partition: its replica list is theirs now), the leader may write again
            await self._undo(topic, partition, leader, None, thaw=True)
            raise
        # Any other failure leaves the outcome unknown: the freeze lapses by itself, by when the
        # old leader's watch shows whether it still leads (it writes only if it does).
        log.info("partition moved", extra={"fields": moved})
        return moved

    async def _await_in_sync(self, topic: str, partition: int, node_id: int) -> None:
        """Wait until the leader has shipped the whole partition to ``node_id`` and the ISR
        (in the coordinator) has it."""
        deadline = time.monotonic() + CATCH_UP_DEADLINE_S
        while True:
            state = self._coordinator.cached_partition(topic, partition)
            if state is None:
                raise NotAvailableError(f"partition {partition} of {topic!r} is gone")
            if node_id in state.isr:
                return
            if time.monotonic() >= deadline:
                raise NotAvailableError(f"node {node_id} did not catch up on partition {partition} of {topic!r} "
                                        "in time")
            await asyncio.sleep(POLL_S * 5)

    async def _undo(self, topic: str, partition: int, leader: int, replicas: tuple[int, ...] | None, *,
                    thaw: bool) -> None:
        """After a move failed before its hand-over: thaw the leader and put the replica list
        back (best effort: a freeze lapses by itself, a left-over replica is moved again later)."""
        coordinator = self._coordinator
        try:
            if thaw:
                await self._peers.peer_call(leader, ThawRequest(topic=topic, partition=partition))
            if replicas is not None:
                await coordinator.reassign(topic, partition, replicas)
        except ANY_ERROR as exc:
            log.warning("undoing a failed move", extra={"fields": {"topic": topic, "partition": partition,
                                                                   "error": str(exc)}})

    async def rebalance(self, leaving: int | None = None) -> dict[str, Any]:
        """Spread the user topics' partitions evenly over the live nodes (``leaving``: move
        everything off that node first), ``MOVES_AT_ONCE`` partitions at a time."""
        coordinator = self._coordinator
        if self._moving.locked():
            raise NotAvailableError("a rebalance is already running on this node")
        async with self._moving, coordinator.exclusive("rebalance"):
            alive = [n.info for n in await coordinator.cluster_nodes() if n.alive]
            nodes = [PlacementNode(n.node_id, n.rack) for n in alive]
            current, stays, preferences = {}, [], {}
            for meta in await coordinator.list_topics():
                pinned = meta.name.startswith(INTERNAL_PREFIX) or meta.kind == "queue"
                preferences[meta.name] = leader_racks(meta.config)
                for state in await coordinator.partition_states(meta.name):
                    if not pinned:
                        current[(meta.name, state.partition)] = state.replicas
                    elif leaving in state.replicas:  # a queue stays with its share state (0198)
                        stays.append({"topic": meta.name, "partition": state.partition})
            if leaving is None:
                plan = rebalance(current, nodes, preferences)
            else:
                if leaving not in {n.node_id for n in nodes}:
                    nodes.append(PlacementNode(leaving))
                plan = decommission(current, nodes, leaving, preferences)
            moves: list[dict[str, Any]] = []
            failed: list[dict[str, Any]] = []
            running = asyncio.Semaphore(MOVES_AT_ONCE)

            async def move_one(topic: str, partition: int, target: tuple[int, ...]) -> None:
                async with running:
                    try:
                        moves.append(await self.move(topic, partition, target))
                    except ANY_ERROR as exc:  # this partition stays where it was; the others still move
                        log.warning("partition not moved", extra={"fields": {
                            "topic": topic, "partition": partition, "error": str(exc)}})
                        failed.append({"topic": topic, "partition": partition, "to": list(target),
                                       "code": getattr(exc, "code", "error"), "detail": str(exc)})

            await asyncio.gather(*(move_one(topic, partition, tuple(target))
                                   for (topic, partition), target in sorted(plan.items())[:MOVES_PER_CALL_MAX]))
            moves.sort(key=lambda m: (m["topic"], m["partition"]))
            # ``stays``: what a decommission cannot move (queues, group offsets): retiring the node
            # loses them until they can move with leadership.
            return {"moves": moves, "failed": failed, "planned": len(plan), "stays": stays}
