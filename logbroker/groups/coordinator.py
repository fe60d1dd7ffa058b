"""The group coordinator: consumer groups' membership (in memory) and committed offsets (in the
internal log ``__consumer_offsets``, partitioned by group).

Records of ``__consumer_offsets`` (msgpack key and value, so compaction can keep the newest per key):
- ``["o", group, topic, partition]`` -> ``{offset, generation, member, committed_ms}``: a commit;
- ``["g", group]`` -> ``{generation, strategy}``: the group's generation after a rebalance, so a
  restarted node continues the generation count and never reissues an old generation;
- ``["g", group]`` -> nil: the group was deleted: replay forgets it and every offset before it.

On start the log is replayed into memory. Members are not persisted: after a restart every member's
next heartbeat gets 404 and it joins again (at a higher generation). Invariant: a commit is in
memory only if its record was appended to the log first; the answer waits for the topic's flush
policy. Concurrency: all state changes run on the event loop between awaits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import xxhash

from coordinator.errors import UnknownTopicError
from logbroker.errors import GroupNotEmptyError, InvalidRequestError, UnknownGroupError, UnknownPartitionError
from logbroker.groups.assignment import STRATEGIES
from logbroker.groups.group import ANY_CALLER, Caller, Group, Member
from logbroker.groups.requests import CommitRequest, JoinRequest, ResetRequest
from logbroker.internal_log import InternalLog, InternalRecord, pack, unpack
from logbroker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)
OFFSETS_TOPIC: Final = "__consumer_offsets"
OFFSETS_PARTITIONS: Final = 8
ADMIN_MEMBER: Final = "admin"
GROUPS_MAX: Final = 100_000
MEMBERS_PER_GROUP_MAX: Final = 1_000


class Committed(NamedTuple):
    offset: int
    generation: int
    member: str
    committed_ms: int


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupCoordinator:
    def __init__(self, replicas: ReplicaManager, offsets_log: InternalLog, *,
                 clock_ms: Callable[[], int] = monotonic_ms, wall_clock_ms: Callable[[], int] = wall_ms) -> None:
        self._replicas = replicas
        self._log = offsets_log
        self._clock_ms = clock_ms
        self._wall_ms = wall_clock_ms
        self._groups: dict[str, Group] = {}
        self._committed: dict[str, dict[tuple[str, int], Committed]] = {}

    # ---- recovery ------------------------------------------------------------------------------

    def load(self) -> int:
        """Replay ``__consumer_offsets``; returns the number of records read."""
        count = 0
        for partition in range(self._log.partitions):
            for record in self._log.replay(partition):
                count += 1
                try:
                    self._apply(unpack(record.key), unpack(record.value))
                except (ValueError, TypeError, KeyError, IndexError) as exc:  # msgpack errors are ValueErrors
                    log.error("skipping an unreadable record of __consumer_offsets", extra={"fields": {
                        "partition": partition, "offset": record.offset, "error": str(exc)}})
        for name in self._committed:
            self._groups.setdefault(name, Group(name))
        return count

    def _apply(self, key: Any, value: Any) -> None:
        if not isinstance(key, list) or not key:
            raise ValueError(f"not a key of this log: {key!r}")
        if key[0] == "o" and len(key) == 4:
            offsets = self._committed.setdefault(key[1], {})
            if value is None:
                offsets.pop((key[2], key[3]), None)
            else:
                offsets[(key[2], key[3])] = Committed(int(value["offset"]), int(value["generation"]),
                                                      str(value["member"]), int(value["committed_ms"]))
        elif key[0] == "g" and len(key) == 2 and value is None:
            self._groups.pop(key[1], None)
            self._committed.pop(key[1], None)
        elif key[0] == "g" and len(key) == 2:
            if value["strategy"] not in STRATEGIES:
                raise ValueError(f"unknown strategy {value['strategy']!r}")
            group = self._groups.setdefault(key[1], Group(key[1]))  # no GROUPS_MAX on replay: all come back
            group.generation = max(group.generation, int(value["generation"]))
            group.strategy = value["strategy"]
        else:
            raise ValueError(f"not a key of this log: {key!r}")

    def _group(self, name: str) -> Group:
        group = self._groups.get(name)
        if group is None:
            if len(self._groups) >= GROUPS_MAX:
                raise InvalidRequestError(f"this node already holds {GROUPS_MAX} groups")
            group = self._groups[name] = Group(name)
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
                counts[topic] = len(self._replicas.partitions(topic))
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

    async def _persist_generation(self, group: Group) -> None:
        partition = self._partition_of(group.name)
        await self._log.append(partition, [self._generation_record(group)])
        await self._maybe_snapshot(partition)

    def _live_records(self, partition: int) -> list[InternalRecord]:
        """What the partition's records come to: one generation record per group and one offset
        record per committed partition."""
        records = []
        for name, group in sorted(self._groups.items()):
            if self._partition_of(name) != partition:
                continue
            if group.generation:
                records.append(self._generation_record(group))
            committed = sorted(self._committed.get(name, {}).items())
            records += [self._offset_record(name, t, p, c) for (t, p), c in committed]
        return records

    async def _maybe_snapshot(self, partition: int) -> None:
        live: list[InternalRecord] = []

        def count() -> int:
            live.extend(self._live_records(partition))
            return len(live)

        if self._log.wants_snapshot(partition, count) and live:
            await self._log.snapshot(partition, live)

    # ---- membership ----------------------------------------------------------------------------

    async def join(self, name: str, request: JoinRequest, principal: str | None,
                   caller: Caller = ANY_CALLER) -> dict[str, Any]:
        for topic in request.topics:
            self._replicas.partitions(topic)  # unknown topic: 404 before anything changes
        group = self._group(name)
        known = group.members.get(request.member_id) if request.member_id is not None else None
        if known is not None:
            caller.check(known, name)  # a member id is no credential: only its principal rejoins with it
        if request.member_id not in group.members and len(group.members) >= MEMBERS_PER_GROUP_MAX:
            raise InvalidRequestError(f"group {name!r} already has {MEMBERS_PER_GROUP_MAX} members")
        before = group.generation
        member = group.join(request.topics, request.session_timeout_ms, request.strategy,
                            self._counts(request.topics + tuple(group.topics)), self._clock_ms(),
                            principal=principal, member_id=request.member_id)
        if group.generation != before:
            await self._persist_generation(group)
        return self._member_view(group, member)

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
        group.leave(member_id, self._counts(group.topics), caller)
        await self._persist_generation(group)

    async def tick(self) -> None:
        """Expire members whose session timed out; rebalance groups whose topics changed size."""
        now = self._clock_ms()
        for group in list(self._groups.values()):
            if not group.members:
                continue
            counts = self._counts(group.topics)
            before = group.generation
            if not group.expire(now, counts) and group.needs_rebalance(counts):
                group.rebalance(counts)
            if group.generation != before:
                await self._persist_generation(group)

    # ---- offsets -------------------------------------------------------------------------------

    def _check_offset(self, topic: str, partition: int, offset: int) -> None:
        replica = self._replicas.get(topic, partition)
        if offset > replica.high_watermark:
            raise InvalidRequestError(f"offset {offset} of {topic}/{partition} is past its high watermark "
                                      f"{replica.high_watermark}")

    async def commit(self, name: str, request: CommitRequest, caller: Caller = ANY_CALLER) -> dict[str, Any]:
        for topic, partition, offset in request.offsets:
            self._check_offset(topic, partition, offset)
        group = self._groups.get(name) or Group(name)
        group.check_commit(request.member_id, request.generation, [(t, p) for t, p, _ in request.offsets], caller)
        await self._write_offsets(name, request.offsets, request.generation, request.member_id)
        return {"committed": len(request.offsets), "generation": group.generation}

    async def _write_offsets(self, name: str, offsets: tuple[tuple[str, int, int], ...], generation: int,
                             member: str) -> None:
        now = self._wall_ms()
        entries = [(t, p, Committed(o, generation, member, now)) for t, p, o in offsets]
        partition = self._partition_of(name)
        self._group(name)  # may refuse (too many groups) before anything is written
        durable = self._log.append(partition, [self._offset_record(name, t, p, c) for t, p, c in entries])
        committed = self._committed.setdefault(name, {})
        for t, p, c in entries:
            committed[(t, p)] = c
        await durable
        await self._maybe_snapshot(partition)

    async def reset(self, name: str, request: ResetRequest, principal: str | None) -> dict[str, Any]:
        """Set committed offsets of an empty group (no members) for one topic."""
        group = self._known(name) if name in self._groups else Group(name)
        if group.members:
            raise GroupNotEmptyError(f"group {name!r} has {len(group.members)} member(s); offsets can be reset "
                                     "only while it has none")
        count = len(self._replicas.partitions(request.topic))
        targets = self._reset_targets(request, count)
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
        del self._groups[name]
        self._committed.pop(name, None)
        await durable
        await self._maybe_snapshot(partition)

    def _reset_targets(self, request: ResetRequest, count: int) -> list[tuple[int, int]]:
        if request.to == "offsets":
            for partition, offset in request.offsets:
                self._check_offset(request.topic, partition, offset)
            return sorted(request.offsets)
        partitions = request.partitions if request.partitions is not None else range(count)
        out = []
        for partition in partitions:
            replica = self._replicas.get(request.topic, partition)
            if request.to == "earliest":
                offset = replica.log.log_start_offset
            elif request.to == "latest":
                offset = replica.high_watermark
            else:
                assert request.timestamp is not None
                found = replica.log.offset_for_timestamp(request.timestamp)
                offset = replica.high_watermark if found is None else min(found, replica.high_watermark)
            out.append((partition, offset))
        return out

    def committed(self, name: str, topic: str, partition: int) -> int | None:
        found = self._committed.get(name, {}).get((topic, partition))
        return None if found is None else found.offset

    # ---- views ---------------------------------------------------------------------------------

    def list_groups(self) -> list[dict[str, Any]]:
        return [{"group": g.name, "state": "stable" if g.members else "empty", "generation": g.generation,
                 "strategy": g.strategy, "members": len(g.members)}
                for g in sorted(self._groups.values(), key=lambda g: g.name)]

    def describe(self, name: str) -> dict[str, Any]:
        group = self._known(name)
        now = self._clock_ms()
        members = [{**m.to_json(now), "assignment": group.assignment.get(m.member_id, {})}
                   for m in sorted(group.members.values(), key=lambda m: m.member_id)]
        committed = self._committed.get(name, {})
        partitions = {(t, p) for t, n in self._counts(group.topics).items() for p in range(n)} | set(committed)
        offsets = []
        for topic, partition in sorted(partitions):
            try:
                hwm: int | None = self._replicas.get(topic, partition).high_watermark
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
