"""The group coordinator: consumer groups' membership (in memory) and committed offsets (in the
internal log ``__consumer_offsets``, partitioned by group).

Records of ``__consumer_offsets`` (msgpack key and value, so compaction can keep the newest per key):
- ``["o", group, topic, partition]`` -> ``{offset, generation, member, committed_ms, sequence}``: a
  commit (``sequence`` is the member's number for it, -1 when it gave none; older records lack it);
- ``["g", group]`` -> ``{generation, strategy}``: the group's generation after a rebalance, so a
  restarted node continues the generation count and never reissues an old generation;
- ``["g", group]`` -> nil: the group was deleted: replay forgets it and every offset before it.

On start the log is replayed into memory. Members are not persisted: after a restart every member's
next heartbeat gets 404 and it joins again (at a higher generation). Invariant: a commit is in
memory only if its record was appended to the log first; the answer waits for the topic's flush
policy. Concurrency: all state changes run on the event loop between awaits.

Cost: every operation is O(1) in the number of groups (amortized; O(its group's size) for the
group it acts on). ``_live`` counts each offsets partition's live records (what a snapshot would
write) as groups change, so deciding on a snapshot is O(1); a snapshot is written in slices in the
background (decision 0176). The tick acts only on groups ``Sessions`` hands it: those with a
lapsed session and those subscribed to a topic whose partition count changed, a bounded number
per tick. ``_names`` keeps the group names sorted, so a page of the list costs O(log groups + page).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, NamedTuple, Protocol

import xxhash

from coordinator.errors import UnknownTopicError
from logbroker.errors import GroupNotEmptyError, InvalidRequestError, UnknownGroupError, UnknownPartitionError
from logbroker.groups.assignment import STRATEGIES
from logbroker.groups.commit_order import NO_SEQUENCE, superseded
from logbroker.groups.group import ANY_CALLER, Caller, Group, Member
from logbroker.groups.names import SortedNames
from logbroker.groups.requests import CommitRequest, JoinRequest, ResetRequest
from logbroker.groups.sessions import Sessions
from logbroker.internal_log import InternalLog, InternalRecord, pack, unpack
from logbroker.loop_share import LoopShare
from logbroker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)
OFFSETS_TOPIC: Final = "__consumer_offsets"
OFFSETS_PARTITIONS: Final = 8
ADMIN_MEMBER: Final = "admin"
GROUPS_MAX: Final = 100_000
MEMBERS_PER_GROUP_MAX: Final = 1_000
EXPIRIES_PER_TICK_MAX: Final = 2_000  # deadline entries taken per tick; the rest wait for the next
CHECKS_PER_TICK_MAX: Final = 1_000  # groups checked per tick after their topics' partition counts changed
TICK_SLICE_GROUPS: Final = 200  # groups a tick acts on per event-loop step
SNAPSHOT_SLICE_RECORDS: Final = 2_000  # records written per event-loop step of a snapshot
SNAPSHOT_WAIT_S: Final = 10.0


class Committed(NamedTuple):
    offset: int
    generation: int
    member: str
    committed_ms: int
    sequence: int = NO_SEQUENCE


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicView(Protocol):
    """What the coordinator needs to know of the topics its groups consume: partition counts, and
    offsets where this node has them (a cluster node leads only some partitions)."""

    def partition_count(self, topic: str) -> int:
        """Raises ``UnknownTopicError``."""

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """None when this node does not serve the partition (``UnknownPartitionError`` when it
        does not exist)."""

    async def offset_at(self, topic: str, partition: int, at: str) -> int | None:
        """``earliest``, ``latest`` or the first offset at a timestamp (``at`` in ms)."""


class ReplicaTopics:
    """A single node's view: every partition is local."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def partition_count(self, topic: str) -> int:
        return len(self._replicas.partitions(topic))

    def high_watermark(self, topic: str, partition: int) -> int | None:
        return self._replicas.get(topic, partition).high_watermark

    async def offset_at(self, topic: str, partition: int, at: str) -> int | None:
        replica = self._replicas.get(topic, partition)
        if at == "earliest":
            return replica.log.log_start_offset
        if at == "latest":
            return replica.high_watermark
        found = replica.log.offset_for_timestamp(int(at))
        return replica.high_watermark if found is None else min(found, replica.high_watermark)


class GroupCoordinator:
    def __init__(self, replicas: ReplicaManager, offsets_log: InternalLog, *,
                 clock_ms: Callable[[], int] = monotonic_ms, wall_clock_ms: Callable[[], int] = wall_ms,
                 topics: TopicView | None = None) -> None:
        self._topics: TopicView = topics or ReplicaTopics(replicas)
        self._log = offsets_log
        self._clock_ms = clock_ms
        self._wall_ms = wall_clock_ms
        self._groups: dict[str, Group] = {}
        self._names = SortedNames()
        # Committed offsets in log order (what snapshots and replay keep), and what readers see:
        # only offsets whose commit was acknowledged (durable, and replicated as the offsets topic
        # asks), so no reader, nor a member starting from them, sees a commit that a failover can
        # still take back.
        self._committed: dict[str, dict[tuple[str, int], Committed]] = {}
        self._visible: dict[str, dict[tuple[str, int], Committed]] = {}
        self._by_partition: list[set[str]] = [set() for _ in range(offsets_log.partitions)]
        self._live = [0] * offsets_log.partitions
        self._sessions = Sessions()
        self._snapshots: dict[int, asyncio.Task[int]] = {}
        # Members per principal across every group (for the per-user member limit); members live
        # in memory only, so this starts empty with them.
        self._members_of: collections.Counter[str] = collections.Counter()
        if topics is None:  # a cluster node feeds ``topic_changed`` from its metadata watch instead
            replicas.on_topic_change(self.topic_changed)

    def topic_changed(self, topic: str) -> None:
        """A topic's partition count may have changed: its groups are checked at the next tick."""
        self._sessions.topic_changed(topic)

    # ---- recovery ------------------------------------------------------------------------------

    async def load(self) -> int:
        """Replay ``__consumer_offsets``; returns the number of records read. The loop is given
        back every few milliseconds (``LoopShare``): the coordinator is not published until this
        returns."""
        count = 0
        share = LoopShare()
        for partition in range(self._log.partitions):
            for record in self._log.replay(partition):
                count += 1
                if share.due():
                    await share.take()
                try:
                    self._apply(unpack(record.key), unpack(record.value))
                except (ValueError, TypeError, KeyError, IndexError) as exc:  # msgpack errors are ValueErrors
                    log.error("skipping an unreadable record of __consumer_offsets", extra={"fields": {
                        "partition": partition, "offset": record.offset, "error": str(exc)}})
        for name in self._committed:
            if name not in self._groups:
                self._add_group(name)
        self._live = self._recount()
        return count

    def _apply(self, key: Any, value: Any) -> None:
        if not isinstance(key, list) or not key:
            raise ValueError(f"not a key of this log: {key!r}")
        if key[0] == "o" and len(key) == 4:
            offsets = self._committed.setdefault(key[1], {})
            visible = self._visible.setdefault(key[1], {})
            if value is None:
                offsets.pop((key[2], key[3]), None)
                visible.pop((key[2], key[3]), None)
            else:
                offsets[(key[2], key[3])] = visible[(key[2], key[3])] = Committed(
                    int(value["offset"]), int(value["generation"]), str(value["member"]), int(value["committed_ms"]),
                    int(value.get("sequence", NO_SEQUENCE)))
        elif key[0] == "g" and len(key) == 2 and value is None:  # a deleted group (counts: ``load`` recounts)
            self._groups.pop(key[1], None)
            self._names.discard(key[1])
            self._committed.pop(key[1], None)
            self._visible.pop(key[1], None)
            self._by_partition[self._partition_of(key[1])].discard(key[1])
        elif key[0] == "g" and len(key) == 2:
            if value["strategy"] not in STRATEGIES:
                raise ValueError(f"unknown strategy {value['strategy']!r}")
            group = self._groups.get(key[1]) or self._add_group(key[1])  # no GROUPS_MAX on replay: all come back
            group.generation = max(group.generation, int(value["generation"]))
            group.strategy = value["strategy"]
        else:
            raise ValueError(f"not a key of this log: {key!r}")

    def _group(self, name: str) -> Group:
        group = self._groups.get(name)
        if group is None:
            if len(self._groups) >= GROUPS_MAX:
                raise InvalidRequestError(f"this node already holds {GROUPS_MAX} groups")
            group = self._add_group(name)
        return group

    def _add_group(self, name: str) -> Group:
        group = self._groups[name] = Group(name)
        self._names.add(name)
        self._by_partition[self._partition_of(name)].add(name)
        return group

    def remove(self, name: str) -> Group | None:
        """Drop group ``name`` (with its committed offsets) from memory and every index; returns it,
        or None when unknown. O(its committed offsets). Persisting the removal (tombstones) is
        the caller's."""
        group = self._groups.pop(name, None)
        if group is None:
            return None
        self._names.discard(name)
        partition = self._partition_of(name)
        self._live[partition] -= (1 if group.generation else 0) + len(self._committed.pop(name, {}))
        self._visible.pop(name, None)
        self._by_partition[partition].discard(name)
        self._sessions.forget(name)
        return group

    def _known(self, name: str) -> Group:
        group = self._groups.get(name)
        if group is None:
            raise UnknownGroupError(f"unknown group {name!r}")
        return group

    def _partition_of(self, group: str) -> int:
        return xxhash.xxh3_64_intdigest(group.encode()) % self._log.partitions

    def _counts(self, topics: set[str] | tuple[str, ...]) -> dict[str, int]:
        counts = {}
        for topic in topics:
            try:
                counts[topic] = self._topics.partition_count(topic)
            except UnknownTopicError:
                counts[topic] = 0
        return counts

    @staticmethod
    def _generation_record(group: Group) -> InternalRecord:
        return InternalRecord(pack(["g", group.name]), pack({"generation": group.generation,
                                                             "strategy": group.strategy}))

    @staticmethod
    def _offset_record(name: str, topic: str, partition: int, committed: Committed) -> InternalRecord:
        return InternalRecord(pack(["o", name, topic, partition]), pack(committed._asdict()))

    async def _persist_generations(self, changed: list[tuple[Group, int]]) -> None:
        """Append the generation record of each group whose generation moved from the one paired
        with it (one append per offsets partition), then wait until they are durable."""
        batches: dict[int, list[InternalRecord]] = {}
        for group, before in changed:
            if group.generation == before:
                continue
            partition = self._partition_of(group.name)
            if before == 0:
                self._live[partition] += 1
            batches.setdefault(partition, []).append(self._generation_record(group))
        durable = []
        try:
            for partition, records in batches.items():
                durable.append(self._log.append(partition, records))
                self._maybe_snapshot(partition)
        finally:
            await asyncio.gather(*durable)

    # ---- snapshots (decisions 0143, 0176) ------------------------------------------------------

    def _recount(self) -> list[int]:
        """The live records of every partition, counted from scratch: a generation record per
        group past generation 0 and an offset record per committed partition. O(groups)."""
        live = [0] * self._log.partitions
        for name, group in self._groups.items():
            live[self._partition_of(name)] += (1 if group.generation else 0) + len(self._committed.get(name, {}))
        return live

    def _group_records(self, name: str) -> list[InternalRecord]:
        group = self._groups.get(name)
        if group is None:
            return []
        records = [self._generation_record(group)] if group.generation else []
        records += [self._offset_record(name, t, p, c) for (t, p), c in self._committed.get(name, {}).items()]
        return records

    def _slices(self, names: list[str]) -> Iterator[list[InternalRecord]]:
        """The live records of ``names``' groups, about ``SNAPSHOT_SLICE_RECORDS`` at a time, each
        slice read from the state as it is when the slice is taken (a group gone by then has none)."""
        records: list[InternalRecord] = []
        for name in names:
            records += self._group_records(name)
            if len(records) >= SNAPSHOT_SLICE_RECORDS:
                yield records
                records = []
        if records:
            yield records

    def _maybe_snapshot(self, partition: int) -> None:
        """Start a snapshot of ``partition`` in the background when it holds many more records than
        live ones. O(1): the live count is kept as groups change."""
        if partition in self._snapshots or not self._log.wants_snapshot(partition, lambda: self._live[partition]):
            return
        names = list(self._by_partition[partition])  # every group with records before the snapshot
        task = asyncio.ensure_future(self._log.snapshot_in_slices(partition, self._slices(names)))
        self._snapshots[partition] = task
        task.add_done_callback(functools.partial(self._snapshot_done, partition))

    def _snapshot_done(self, partition: int, task: asyncio.Task[int]) -> None:
        self._snapshots.pop(partition, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("snapshot of __consumer_offsets failed; the older records stay", extra={"fields": {
                "partition": partition, "error": str(task.exception())}})

    async def wait_snapshots(self, timeout_s: float = SNAPSHOT_WAIT_S) -> None:
        """Wait (bounded) for the snapshots being written (tests)."""
        if self._snapshots:
            await asyncio.wait(list(self._snapshots.values()), timeout=timeout_s)

    async def close(self, timeout_s: float = SNAPSHOT_WAIT_S) -> None:
        """Let snapshots being written finish (bounded), then cancel the rest: a snapshot cut short
        leaves the older records, which replay to the same state (decision 0143)."""
        await self.wait_snapshots(timeout_s)
        tasks = list(self._snapshots.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def verify(self) -> None:
        """Assert that every index agrees with the state (tests; O(everything))."""
        assert self._live == self._recount(), (self._live, self._recount())
        by_partition: list[set[str]] = [set() for _ in range(self._log.partitions)]
        for name in self._groups:
            by_partition[self._partition_of(name)].add(name)
        assert self._by_partition == by_partition
        self._names.verify()
        assert self._names.after(None, len(self._groups) + 1) == (sorted(self._groups), False)
        assert set(self._committed) <= set(self._groups)
        self._sessions.verify(self._groups)
        held = collections.Counter(m.principal or "" for g in self._groups.values() for m in g.members.values())
        assert self._members_of == held, (self._members_of, held)

    # ---- membership ----------------------------------------------------------------------------

    async def join(self, name: str, request: JoinRequest, principal: str | None,
                   caller: Caller = ANY_CALLER) -> dict[str, Any]:
        for topic in request.topics:
            self._topics.partition_count(topic)  # unknown topic: 404 before anything changes
        group = self._group(name)
        known = group.members.get(request.member_id) if request.member_id is not None else None
        if known is not None:
            caller.check(known, name)  # a member id is no credential: only its principal rejoins with it
        if request.member_id not in group.members and len(group.members) >= MEMBERS_PER_GROUP_MAX:
            raise InvalidRequestError(f"group {name!r} already has {MEMBERS_PER_GROUP_MAX} members")
        before = group.generation
        known = group.members.get(request.member_id) if request.member_id is not None else None
        deadline_before = known.deadline_ms if known is not None else None
        new = request.member_id not in group.members
        member = group.join(request.topics, request.session_timeout_ms, request.strategy,
                            self._counts(request.topics + tuple(group.topics)), self._clock_ms(),
                            principal=principal, member_id=request.member_id)
        if new:
            self._members_of[member.principal or ""] += 1
        if deadline_before is None or member.deadline_ms < deadline_before:
            self._sessions.joined(name, member)
        self._sessions.changed(group)
        await self._persist_generations([(group, before)])
        return self._member_view(group, member)

    def members_of(self, principal: str) -> int:
        """How many members ``principal`` holds across every group (O(1))."""
        return self._members_of[principal]

    def has_member(self, name: str, member_id: str | None) -> bool:
        group = self._groups.get(name)
        return group is not None and member_id is not None and member_id in group.members

    def _forget_members(self, principals: list[str | None]) -> None:
        for principal in principals:
            key = principal or ""
            self._members_of[key] -= 1
            if self._members_of[key] <= 0:
                del self._members_of[key]

    def _member_view(self, group: Group, member: Member) -> dict[str, Any]:
        return {"member_id": member.member_id, "generation": group.generation, "strategy": group.strategy,
                "assignment": group.assignment.get(member.member_id, {}),
                "heartbeat_interval_ms": max(1, member.session_timeout_ms // 3),
                "session_timeout_ms": member.session_timeout_ms}

    async def heartbeat(self, name: str, member_id: str, caller: Caller = ANY_CALLER) -> dict[str, Any]:
        group = self._known(name)
        member = group.heartbeat(member_id, self._clock_ms(), caller)
        return self._member_view(group, member)

    async def leave(self, name: str, member_id: str, caller: Caller = ANY_CALLER) -> None:
        group = self._known(name)
        before = group.generation
        leaving = group.members.get(member_id)
        group.leave(member_id, self._counts(group.topics), caller)
        if leaving is not None:
            self._forget_members([leaving.principal])
        self._sessions.changed(group)
        await self._persist_generations([(group, before)])

    async def tick(self) -> None:
        """Expire members whose session timed out; rebalance groups whose topics changed size.
        Touches only those groups (at most ``EXPIRIES_PER_TICK_MAX`` deadlines and
        ``CHECKS_PER_TICK_MAX`` checks a tick, the rest next tick; ``TICK_SLICE_GROUPS`` per
        event-loop step): each group rebalances once for all its lapsed members, and a slice's
        generation records go out in one append per offsets partition."""
        now = self._clock_ms()
        names = list(dict.fromkeys(self._sessions.due(now, self._groups, EXPIRIES_PER_TICK_MAX)
                                   + self._sessions.to_check(CHECKS_PER_TICK_MAX)))
        self._sessions.compact(self._groups)
        for start in range(0, len(names), TICK_SLICE_GROUPS):
            if start:
                await asyncio.sleep(0)  # let requests in between slices
            changed = []
            for name in names[start:start + TICK_SLICE_GROUPS]:
                group = self._groups.get(name)  # as it is now: it may have changed since the tick began
                if group is None or not group.members:
                    continue
                counts = self._counts(group.topics)
                before = group.generation
                principals = {m.member_id: m.principal for m in group.members.values()}
                gone = group.expire(now, counts)
                self._forget_members([principals[m] for m in gone])
                if not gone and group.needs_rebalance(counts):
                    group.rebalance(counts)
                self._sessions.changed(group)
                changed.append((group, before))
            await self._persist_generations(changed)

    # ---- offsets -------------------------------------------------------------------------------

    def _check_offset(self, topic: str, partition: int, offset: int) -> None:
        """A commit past the high watermark is refused where this node knows it (on a cluster, a
        partition led elsewhere is checked for existence only, as Kafka checks none)."""
        hwm = self._topics.high_watermark(topic, partition)
        if hwm is not None and offset > hwm:
            raise InvalidRequestError(f"offset {offset} of {topic}/{partition} is past its high watermark {hwm}")

    async def commit(self, name: str, request: CommitRequest, caller: Caller = ANY_CALLER) -> dict[str, Any]:
        for topic, partition, offset in request.offsets:
            self._check_offset(topic, partition, offset)
        group = self._groups.get(name) or Group(name)
        group.check_commit(request.member_id, request.generation, [(t, p) for t, p, _ in request.offsets], caller)
        # Checked and written with no await between: commits apply in the order they are checked.
        previous = self._committed.get(name, {})
        later = [(t, p) for t, p, _ in request.offsets if (t, p) in previous
                 and superseded(previous[(t, p)].member, previous[(t, p)].generation, previous[(t, p)].sequence,
                                request.member_id, request.generation, request.sequence)]
        offsets = tuple(o for o in request.offsets if (o[0], o[1]) not in later) if later else request.offsets
        if offsets:
            await self._write_offsets(name, offsets, request.generation, request.member_id, request.sequence)
        return {"committed": len(offsets), "generation": group.generation,
                "superseded": [{"topic": t, "partition": p} for t, p in later]}

    async def _write_offsets(self, name: str, offsets: tuple[tuple[str, int, int], ...], generation: int,
                             member: str, sequence: int = NO_SEQUENCE) -> None:
        now = self._wall_ms()
        entries = [(t, p, Committed(o, generation, member, now, sequence)) for t, p, o in offsets]
        partition = self._partition_of(name)
        self._group(name)  # may refuse (too many groups) before anything is written
        durable = self._log.append(partition, [self._offset_record(name, t, p, c) for t, p, c in entries])
        committed = self._committed.setdefault(name, {})
        self._live[partition] += len({(t, p) for t, p, _ in entries} - committed.keys())
        for t, p, c in entries:
            committed[(t, p)] = c
        self._maybe_snapshot(partition)
        await durable
        if self._committed.get(name) is committed:  # the group was not deleted meanwhile
            visible = self._visible.setdefault(name, {})
            for t, p, c in entries:
                if committed.get((t, p)) is c:  # not already superseded by a later commit
                    visible[(t, p)] = c

    async def reset(self, name: str, request: ResetRequest, principal: str | None) -> dict[str, Any]:
        """Set committed offsets of an empty group (no members) for one topic."""
        group = self._known(name) if name in self._groups else Group(name)
        if group.members:
            raise GroupNotEmptyError(f"group {name!r} has {len(group.members)} member(s); offsets can be reset "
                                     "only while it has none")
        count = self._topics.partition_count(request.topic)
        targets = await self._reset_targets(request, count)
        group = self._known(name) if name in self._groups else group
        if group.members:  # a member joined while the targets were looked up (a cluster asks leaders)
            raise GroupNotEmptyError(f"group {name!r} gained a member during the reset; nothing was reset")
        await self._write_offsets(name, tuple((request.topic, p, o) for p, o in targets), -1,
                                  f"{ADMIN_MEMBER}:{principal or '-'}")
        return {"group": name, "topic": request.topic,
                "offsets": [{"partition": p, "offset": o} for p, o in targets]}

    async def delete_group(self, name: str) -> None:
        """Forget an empty group and its committed offsets, for good: a tombstone record makes
        replay drop what came before it (the group and offsets are gone from memory at once)."""
        group = self._known(name)
        if group.members:
            raise GroupNotEmptyError(f"group {name!r} has {len(group.members)} member(s); a group can be deleted "
                                     "only while it has none")
        partition = self._partition_of(name)
        durable = self._log.append(partition, [InternalRecord(pack(["g", name]), None)])
        self.remove(name)
        await durable
        self._maybe_snapshot(partition)

    async def _reset_targets(self, request: ResetRequest, count: int) -> list[tuple[int, int]]:
        if request.to == "offsets":
            for partition, offset in request.offsets:
                self._check_offset(request.topic, partition, offset)
            return sorted(request.offsets)
        partitions = request.partitions if request.partitions is not None else range(count)
        if request.to in ("earliest", "latest"):
            at = request.to
        else:
            assert request.timestamp is not None
            at = str(request.timestamp)
        out = []
        for partition in partitions:
            self._topics.high_watermark(request.topic, partition)  # an unknown partition: 404 first
            found = await self._topics.offset_at(request.topic, partition, at)
            if found is None:
                raise UnknownPartitionError(f"no offset for {request.topic}/{partition} at {at}")
            out.append((partition, found))
        return out

    def committed(self, name: str, topic: str, partition: int) -> int | None:
        found = self._visible.get(name, {}).get((topic, partition))
        return None if found is None else found.offset

    def committed_offsets(self, name: str) -> list[tuple[str, int, int]]:
        """Every committed offset of the group: (topic, partition, offset), in order."""
        return sorted((t, p, c.offset) for (t, p), c in self._visible.get(name, {}).items())

    # ---- views ---------------------------------------------------------------------------------

    def list_groups(self) -> list[dict[str, Any]]:
        """Every group's summary, by name (O(groups): ``names_after`` and ``summary`` page it)."""
        return self.summaries(self.names_after(None, len(self._groups))[0])

    def names_after(self, cursor: str | None, count: int) -> tuple[list[str], bool]:
        """Up to ``count`` group names after ``cursor`` (None: from the first), by name, and
        whether more follow. O(log groups + count)."""
        return self._names.after(cursor, count)

    def summaries(self, names: list[str]) -> list[dict[str, Any]]:
        """The summaries of the groups ``names`` that exist, in that order."""
        return [{"group": g.name, "state": "stable" if g.members else "empty", "generation": g.generation,
                 "strategy": g.strategy, "members": len(g.members)}
                for g in (self._groups.get(n) for n in names) if g is not None]

    def describe(self, name: str) -> dict[str, Any]:
        group = self._known(name)
        now = self._clock_ms()
        members = [{**m.to_json(now), "assignment": group.assignment.get(m.member_id, {})}
                   for m in sorted(group.members.values(), key=lambda m: m.member_id)]
        committed = self._visible.get(name, {})
        partitions = {(t, p) for t, n in self._counts(group.topics).items() for p in range(n)} | set(committed)
        offsets = []
        for topic, partition in sorted(partitions):
            try:
                hwm = self._topics.high_watermark(topic, partition)
            except (UnknownTopicError, UnknownPartitionError):
                hwm = None
            found = committed.get((topic, partition))
            offsets.append({
                "topic": topic, "partition": partition, "member_id": group.owner(topic, partition),
                "committed_offset": None if found is None else found.offset, "high_watermark": hwm,
                "lag": None if found is None or hwm is None else max(0, hwm - found.offset),
                "committed_generation": None if found is None else found.generation})
        return {"group": name, "state": "stable" if group.members else "empty", "generation": group.generation,
                "strategy": group.strategy, "members": members,
                "assignment": {m: a for m, a in sorted(group.assignment.items())}, "offsets": offsets}
