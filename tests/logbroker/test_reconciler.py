"""The reconciler's elections over a scripted coordinator: a leaderless partition whose candidate
does not take it (alive by its lease, but paused or cut off from etcd) gets another in-sync
replica standing once the grace period ends, with no metadata change to wake it (decision 0384)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest

from coordinator.base import Coordinator
from coordinator.models import ClusterNode, NodeInfo, PartitionState, TopicMetadata
from logbroker.partition_roles import ELECTION_GRACE_MS, NO_LEADER
from logbroker.ports import PartitionHost
from logbroker.reconciler import Reconciler
from logbroker.replication.manager import ReplicationManager

META = TopicMetadata("t", "id-t", 1, 3, "topic", {}, "alice", 0)


class ScriptedCoordinator:
    def __init__(self, state: PartitionState, alive: tuple[int, ...]) -> None:
        self.state, self.alive = state, alive
        self.elections: list[tuple[str, int]] = []
        self.reads = 0

    async def list_topics(self) -> list[TopicMetadata]:
        return [META]

    async def cluster_nodes(self) -> list[ClusterNode]:
        return [ClusterNode(NodeInfo(n, f"http://127.0.0.1:{8000 + n}", f"127.0.0.1:{9000 + n}", None,
                                     f"127.0.0.1:{7000 + n}", 1), n in self.alive) for n in (1, 2, 3)]

    def cached_topic(self, name: str) -> TopicMetadata | None:
        return META if name == "t" else None

    async def partition_states(self, name: str) -> list[PartitionState]:
        self.reads += 1
        return [self.state]

    def cached_partition(self, name: str, partition: int) -> PartitionState:
        return self.state

    async def elect(self, topic: str, partition: int) -> None:
        self.elections.append((topic, partition))


class Quiet:
    """The replication manager and the host: nothing to do here."""

    def __getattr__(self, name: str) -> Any:
        async def later(*args: Any) -> None:
            return None

        if name in ("open_hosted", "drop_local_topic", "drop_moved", "reconcile_groups", "reconcile_queues"):
            return later
        if name == "local_partitions":
            return lambda topic: [0]
        return lambda *args, **kwargs: None


async def run_rounds(reconciler: Reconciler, until: Any, timeout_s: float) -> None:
    async def loop() -> None:
        while True:
            await reconciler.round()

    task = asyncio.create_task(loop())
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not until() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def reconciler(coordinator: ScriptedCoordinator, node_id: int) -> Reconciler:
    quiet = Quiet()
    return Reconciler(cast(Coordinator, coordinator), cast(ReplicationManager, quiet), cast(PartitionHost, quiet),
                      node_id)


@pytest.mark.asyncio
async def test_the_next_in_sync_replica_stands_once_the_candidate_let_the_grace_period_pass():
    coordinator = ScriptedCoordinator(PartitionState("t", 0, (1, 2, 3), (1, 2, 3), NO_LEADER, 4), (1, 2, 3))
    second = reconciler(coordinator, 2)
    await second.reconcile_once()
    assert coordinator.elections == [], "node 1, the preferred replica, is the candidate at first"
    started = asyncio.get_running_loop().time()
    await run_rounds(second, lambda: coordinator.elections, timeout_s=ELECTION_GRACE_MS / 1000 * 4)
    assert coordinator.elections and coordinator.elections[0] == ("t", 0)
    assert asyncio.get_running_loop().time() - started >= ELECTION_GRACE_MS / 1000 * 0.9


@pytest.mark.asyncio
async def test_a_partition_with_no_other_live_in_sync_replica_is_not_looked_at_again_and_again():
    coordinator = ScriptedCoordinator(PartitionState("t", 0, (1, 2, 3), (1, 2), NO_LEADER, 4), (1, 3))
    third = reconciler(coordinator, 3)
    await third.reconcile_once()
    await run_rounds(third, lambda: False, timeout_s=ELECTION_GRACE_MS / 1000 * 3)
    assert coordinator.elections == [], "node 3 is not in sync: it never stands"
    assert coordinator.reads == 1, "no one could stand in for node 1: no look again each grace period"
