"""The coordinator's incremental indexes (decision 0176): after any sequence of joins, heartbeats,
commits, resets, leaves, expiries, topic resizes, removals and snapshot steps, the running
live-record counts equal a recount, the session and subscription indexes agree with the groups,
and the offsets log (old records, partial snapshot and later appends together) replays to the
same offsets and generations. Many lapsed sessions cost one rebalance per group.

The coordinator runs over an in-memory offsets log and topic table (``FakeLog``,
``FakeReplicas``) so that hypothesis can drive thousands of steps; snapshots of it run as
background tasks on the test's event loop, interleaved with the operations."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from coordinator.errors import CoordinatorError, UnknownTopicError
from logbroker.errors import BrokerError, UnknownPartitionError
from logbroker.groups import coordinator as coordinator_module
from logbroker.groups import group as group_module
from logbroker.groups.coordinator import GroupCoordinator
from logbroker.groups.requests import CommitRequest, JoinRequest, ResetRequest
from logbroker.internal_log import InternalRecord

PARTITIONS = 8
SNAPSHOT_AFTER = 12  # records since the last snapshot (the real floor is 10,000)


class FakeReplicas:
    """Topic -> partition count, with the change listeners of ``ReplicaManager``."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts
        self._listeners: list[Callable[[str], None]] = []

    def on_topic_change(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def resize(self, topic: str, count: int | None) -> None:
        if count is None:
            self.counts.pop(topic, None)
        else:
            self.counts[topic] = count
        for listener in self._listeners:
            listener(topic)

    def partitions(self, topic: str) -> list[None]:
        if topic not in self.counts:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return [None] * self.counts[topic]

    def get(self, topic: str, partition: int) -> SimpleNamespace:
        if not 0 <= partition < len(self.partitions(topic)):
            raise UnknownPartitionError(f"no partition {partition}", partitions=self.counts[topic])
        return SimpleNamespace(high_watermark=1_000_000, log=SimpleNamespace(log_start_offset=0))


class FakeLog:
    """``InternalLog``'s contract in memory: appends, a snapshot written a slice per loop step
    (then the records before it are dropped), replay."""

    partitions = PARTITIONS

    def __init__(self) -> None:
        self.records: list[list[InternalRecord]] = [[] for _ in range(PARTITIONS)]
        self.since = [0] * PARTITIONS
        self.snapshotting = [False] * PARTITIONS
        self.appends = 0
        self.snapshots = 0

    def append(self, partition: int, records: Sequence[InternalRecord]) -> asyncio.Future[None]:
        self.records[partition] += records
        self.since[partition] += len(records)
        self.appends += 1
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    def wants_snapshot(self, partition: int, live_records: Callable[[], int]) -> bool:
        since = self.since[partition]
        return not self.snapshotting[partition] and since > SNAPSHOT_AFTER and since > 2 * live_records()

    async def snapshot_in_slices(self, partition: int, slices: Iterable[Sequence[InternalRecord]]) -> int:
        self.snapshotting[partition] = True
        try:
            start = len(self.records[partition])
            self.since[partition] = 0
            for records in slices:
                self.records[partition] += records
                self.since[partition] += len(records)
                await asyncio.sleep(0)
            del self.records[partition][:start]
            self.snapshots += 1
            return 1
        finally:
            self.snapshotting[partition] = False

    def replay(self, partition: int) -> Iterator[SimpleNamespace]:
        for offset, record in enumerate(self.records[partition]):
            yield SimpleNamespace(key=record.key, value=record.value, offset=offset)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def state_of(coordinator: GroupCoordinator, names: Iterable[str]) -> dict[str, Any]:
    """Generations and committed offsets of ``names`` (what the offsets log must keep)."""
    out = {}
    for name in names:
        group = coordinator._groups.get(name)
        committed = coordinator._committed.get(name, {})
        out[name] = (group.generation if group else 0, {k: v.offset for k, v in committed.items()})
    return out


GROUPS = [f"g{i}" for i in range(6)]
TOPICS = ["a", "b", "c"]


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.replicas = FakeReplicas({"a": 2, "b": 3})
        self.log = FakeLog()
        self.clock = Clock()
        self.coordinator = GroupCoordinator(self.replicas, self.log, clock_ms=self.clock)  # type: ignore[arg-type]
        self.deleted: set[str] = set()  # deleted through the tombstone and not joined again since

    @initialize()
    def lower_slices(self) -> None:
        self._slice = coordinator_module.SNAPSHOT_SLICE_RECORDS
        coordinator_module.SNAPSHOT_SLICE_RECORDS = 2
        # Member ids in join order, not random: assignments (and so what a rule draws from) must
        # be the same when hypothesis replays a run.
        self._uuid = group_module.uuid
        ids = iter(range(1 << 30))
        group_module.uuid = SimpleNamespace(uuid4=lambda: SimpleNamespace(hex=f"{next(ids):032x}"))  # type: ignore[assignment]

    def run(self, coro: Any) -> Any:
        try:
            return self.loop.run_until_complete(coro)
        except (BrokerError, CoordinatorError):
            return None  # refused (409, 404, 400 ...): it must have changed nothing the invariants see

    def members(self) -> list[tuple[str, str]]:
        return [(n, m) for n, g in self.coordinator._groups.items() for m in g.members]

    @rule(group=st.sampled_from(GROUPS), topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2),
          timeout=st.integers(100, 2_000), data=st.data())
    def join(self, group: str, topics: list[str], timeout: int, data: st.DataObject) -> None:
        self.deleted.discard(group)
        known = [m for n, m in self.members() if n == group]
        member_id = data.draw(st.sampled_from([None, *known]))
        self.run(self.coordinator.join(group, JoinRequest(tuple(sorted(set(topics))), timeout, None, member_id),
                                       None))

    @precondition(lambda self: self.members())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        group, member = data.draw(st.sampled_from(self.members()))
        self.run(self.coordinator.heartbeat(group, member))

    @precondition(lambda self: self.members())
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        group, member = data.draw(st.sampled_from(self.members()))
        self.run(self.coordinator.leave(group, member))

    @precondition(lambda self: self.members())
    @rule(data=st.data(), offset=st.integers(0, 100))
    def commit(self, data: st.DataObject, offset: int) -> None:
        group, member = data.draw(st.sampled_from(self.members()))
        state = self.coordinator._groups[group]
        owned = [(t, p) for t, ps in state.assignment.get(member, {}).items() for p in ps]
        if owned:
            chosen = data.draw(st.lists(st.sampled_from(owned), min_size=1, unique=True))
            request = CommitRequest(member, state.generation, tuple((t, p, offset) for t, p in chosen))
            self.run(self.coordinator.commit(group, request))

    @rule(group=st.sampled_from(GROUPS), topic=st.sampled_from(TOPICS), offset=st.integers(0, 100))
    def reset(self, group: str, topic: str, offset: int) -> None:
        self.deleted.discard(group)
        self.run(self.coordinator.reset(group, ResetRequest(topic, "offsets", None, None, ((0, offset),)), None))

    @rule(elapsed=st.integers(0, 2_500))
    def tick(self, elapsed: int) -> None:
        self.clock.now += elapsed
        self.run(self.coordinator.tick())

    @rule(topic=st.sampled_from(TOPICS), count=st.none() | st.integers(1, 4))
    def resize(self, topic: str, count: int | None) -> None:
        self.replicas.resize(topic, count)

    @rule(group=st.sampled_from(GROUPS))
    def delete(self, group: str) -> None:
        """``delete_group``: the tombstone and ``remove`` (the indexes, the counts)."""
        state = self.coordinator._groups.get(group)
        if state is not None and not state.members:
            self.run(self.coordinator.delete_group(group))
            assert group not in self.coordinator._groups
            self.deleted.add(group)

    @rule()
    def let_snapshots_run(self) -> None:
        self.loop.run_until_complete(asyncio.sleep(0))

    @invariant()
    def indexes_agree(self) -> None:
        self.coordinator.verify()

    @invariant()
    def log_replays_to_the_state(self) -> None:
        replayed = GroupCoordinator(FakeReplicas({}), self.log)  # type: ignore[arg-type]
        self.loop.run_until_complete(replayed.load())
        kept = list(self.coordinator._groups)
        assert state_of(replayed, kept) == state_of(self.coordinator, kept)
        assert not self.deleted & set(replayed._groups), "a deleted group came back on replay"
        replayed.verify()

    def teardown(self) -> None:
        coordinator_module.SNAPSHOT_SLICE_RECORDS = getattr(self, "_slice", coordinator_module.SNAPSHOT_SLICE_RECORDS)
        group_module.uuid = getattr(self, "_uuid", group_module.uuid)  # type: ignore[assignment]
        self.loop.run_until_complete(self.coordinator.close(1.0))
        self.loop.close()


CoordinatorMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None,
                                                suppress_health_check=[HealthCheck.too_slow])
TestCoordinatorIndexes = CoordinatorMachine.TestCase


class _NoDraw:
    """Stands for hypothesis's ``data`` in a fixed run: every draw is None (a new member)."""

    def draw(self, strategy: Any) -> None:
        return None


def test_the_machine_took_snapshots_during_its_runs() -> None:
    """Not vacuous: a fixed run of the machine's rules crosses the snapshot threshold, checking
    the invariants while snapshots are part-written, and finishes snapshots."""
    machine = CoordinatorMachine()
    machine.lower_slices()
    try:
        for i in range(40):
            machine.join(GROUPS[i % len(GROUPS)], ["a"], 100, _NoDraw())  # type: ignore[arg-type]
            machine.tick(150)
            machine.let_snapshots_run()
            machine.indexes_agree()
            machine.log_replays_to_the_state()
        for _ in range(20):
            machine.let_snapshots_run()
        assert machine.log.snapshots > 0
    finally:
        machine.teardown()


@pytest.mark.asyncio
async def test_many_lapsed_sessions_cost_one_rebalance_per_group() -> None:
    clock = Clock()
    log = FakeLog()
    coordinator = GroupCoordinator(FakeReplicas({"a": 4}), log, clock_ms=clock)  # type: ignore[arg-type]
    groups, members = 30, 20
    for g in range(groups):
        for _ in range(members):
            await coordinator.join(f"g{g}", JoinRequest(("a",), 100, None, None), None)
    generations = {f"g{g}": coordinator._groups[f"g{g}"].generation for g in range(groups)}
    assert set(generations.values()) == {members}
    clock.now = 1_000
    appends = log.appends
    await coordinator.tick()
    for name, generation in generations.items():
        group = coordinator._groups[name]
        assert not group.members and group.generation == generation + 1, "one rebalance for all its members"
    assert log.appends - appends <= PARTITIONS, "one append per offsets partition"
    coordinator.verify()
    await coordinator.tick()
    assert all(coordinator._groups[n].generation == g + 1 for n, g in generations.items())
    assert coordinator._sessions.heap_entries == 0


@pytest.mark.asyncio
async def test_expiries_beyond_the_per_tick_bound_wait_for_the_next_tick(monkeypatch) -> None:
    monkeypatch.setattr(coordinator_module, "EXPIRIES_PER_TICK_MAX", 50)
    clock = Clock()
    coordinator = GroupCoordinator(FakeReplicas({"a": 1}), FakeLog(), clock_ms=clock)  # type: ignore[arg-type]
    for g in range(200):
        await coordinator.join(f"g{g:03d}", JoinRequest(("a",), 100, None, None), None)
    clock.now = 1_000
    emptied = []
    for _ in range(4):
        await coordinator.tick()
        emptied.append(sum(1 for g in coordinator._groups.values() if not g.members))
        coordinator.verify()
    assert emptied == [50, 100, 150, 200]


@pytest.mark.asyncio
async def test_heartbeats_keep_members_and_the_heap_stays_bounded() -> None:
    """Join/leave churn and heartbeats never let the deadline heap grow past its bound."""
    clock = Clock()
    coordinator = GroupCoordinator(FakeReplicas({"a": 2}), FakeLog(), clock_ms=clock)  # type: ignore[arg-type]
    steady = await coordinator.join("steady", JoinRequest(("a",), 1_000, None, None), None)
    for i in range(5_000):
        view = await coordinator.join(f"churn{i % 10}", JoinRequest(("a",), 300_000, None, None), None)
        await coordinator.leave(f"churn{i % 10}", view["member_id"])
        if i % 100 == 0:
            clock.now += 500
            await coordinator.heartbeat("steady", steady["member_id"])
            await coordinator.tick()
    assert coordinator._sessions.heap_entries <= 2 * coordinator._sessions.members_live + 2_000
    assert steady["member_id"] in coordinator._groups["steady"].members
    coordinator.verify()


@pytest.mark.asyncio
async def test_a_resized_topic_rebalances_only_its_groups() -> None:
    replicas = FakeReplicas({"a": 2, "b": 2})
    coordinator = GroupCoordinator(replicas, FakeLog())  # type: ignore[arg-type]
    await coordinator.join("on-a", JoinRequest(("a",), 10_000, None, None), None)
    await coordinator.join("on-b", JoinRequest(("b",), 10_000, None, None), None)
    replicas.resize("a", 5)
    await coordinator.tick()
    assert coordinator._groups["on-a"].generation == 2
    assert coordinator._groups["on-a"].assignment != {} and coordinator._groups["on-b"].generation == 1
    replicas.resize("a", None)
    await coordinator.tick()
    assert coordinator._groups["on-a"].generation == 3 and coordinator._groups["on-a"].partitions == {}


class HeldLog(FakeLog):
    """Appends that are acknowledged (or fail) only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = False
        self.pending: list[asyncio.Future[None]] = []

    def append(self, partition: int, records: Sequence[InternalRecord]) -> asyncio.Future[None]:
        done = super().append(partition, records)
        if not self.holding:
            return done
        held: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(held)
        return held


@pytest.mark.asyncio
async def test_a_commit_is_seen_only_once_acknowledged_and_never_when_it_fails() -> None:
    """Readers (describe, a member's starting position) see acknowledged commits only: a commit a
    failover can still take back is never shown (the chaos checker once saw one go backwards)."""
    log = HeldLog()
    coordinator = GroupCoordinator(FakeReplicas({"a": 1}), log)  # type: ignore[arg-type]
    joined = await coordinator.join("g", JoinRequest(("a",), 10_000, None, None), None)
    member, generation = joined["member_id"], joined["generation"]
    log.holding = True

    def seen() -> int | None:
        assert coordinator.describe("g")["offsets"][0]["committed_offset"] == coordinator.committed("g", "a", 0)
        return coordinator.committed("g", "a", 0)

    first = asyncio.ensure_future(coordinator.commit("g", CommitRequest(member, generation, (("a", 0, 5),))))
    await asyncio.sleep(0)
    assert seen() is None  # written, not yet acknowledged
    log.pending[-1].set_result(None)
    await first
    assert seen() == 5
    failing = asyncio.ensure_future(coordinator.commit("g", CommitRequest(member, generation, (("a", 0, 9),))))
    await asyncio.sleep(0)
    assert seen() == 5
    log.pending[-1].set_exception(BrokerError("leadership ended"))
    with pytest.raises(BrokerError):
        await failing
    assert seen() == 5  # the failed commit never shows
    later = asyncio.ensure_future(coordinator.commit("g", CommitRequest(member, generation, (("a", 0, 12),))))
    await asyncio.sleep(0)
    log.pending[-1].set_result(None)
    await later
    assert seen() == 12
