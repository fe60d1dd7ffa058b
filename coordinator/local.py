"""The embedded coordinator of a single node: no etcd, state in ``<data_dir>/coordinator.json``
(consumer groups' owners and grants in ``groups.jsonl``, an append-only journal).

Every partition lives on this node, which leads it with epoch 1. Changes are written atomically
(temp file, fsync, rename) before they are acknowledged, so a restart keeps every topic, user and
grant. One ``asyncio.Lock`` orders the changes; each change builds the next state, saves it, and
only then replaces the in-memory state, so a failed save changes nothing. Reads come from memory.
The groups each user owns are counted as group records change (``count_groups_owned`` is O(1)).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, final

from coordinator.base import Coordinator
from coordinator.errors import (
    CoordinatorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownGroupRecordError,
    UnknownTopicError,
    UnknownUserError,
    UserExistsError,
    UserOwnsTopicsError,
)
from coordinator.etcd_keys import HOUR_DIGITS
from coordinator.group_journal import GroupJournal
from coordinator.models import NodeInfo, PartitionState, TopicMetadata, TopicSpec, check_partition_growth
from coordinator.users import Acl, GroupRecord, UserRecord, acl_from_json, acl_to_json, group_without_user
from segments.checkpoint import write_atomic
from segments.errors import StorageFullError, is_no_space

STATE_FILE: Final = "coordinator.json"
USAGE_DIR: Final = "usage"
STATE_VERSION: Final = 2
READABLE_VERSIONS: Final = (1, 2)
STATE_BYTES_MAX: Final = 64 * 1024 * 1024
STATE_FILE_MODE: Final = 0o600  # holds password hashes
LEADER_EPOCH: Final = 1


@dataclasses.dataclass(frozen=True, slots=True)
class _State:
    topics: Mapping[str, TopicMetadata]
    users: Mapping[str, UserRecord]
    acls: Mapping[str, Acl]

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "topics": {n: t.to_json() for n, t in self.topics.items()},
                "users": {n: u.to_json() for n, u in self.users.items()},
                "acls": {t: acl_to_json(a) for t, a in self.acls.items() if a}}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> _State:
        if raw.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"unsupported version {raw.get('version')!r}")
        return cls({name: TopicMetadata.from_json(t) for name, t in raw["topics"].items()},
                   {name: UserRecord.from_json(u) for name, u in raw.get("users", {}).items()},
                   {topic: acl_from_json(a) for topic, a in raw.get("acls", {}).items()})


@final
class LocalCoordinator(Coordinator):
    def __init__(self, data_dir: str, node: NodeInfo) -> None:
        self._path = os.path.join(data_dir, STATE_FILE)
        self._usage_dir = os.path.join(data_dir, USAGE_DIR)
        self._node = node
        self._state = _State({}, {}, {})
        self._topic_ids: dict[str, str] = {}  # topic id -> name, rebuilt with each new state
        self._journal = GroupJournal(data_dir)
        self._groups: dict[str, GroupRecord] = {}
        self._owned: collections.Counter[str] = collections.Counter()  # owner -> groups owned
        self._lock = asyncio.Lock()

    @property
    def node_id(self) -> int:
        return self._node.node_id

    def advertise(self, node: NodeInfo) -> None:
        self._node = node

    async def start(self) -> None:
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        self._groups = self._journal.load()
        self._owned = collections.Counter(g.owner for g in self._groups.values() if g.owner is not None)
        try:
            with open(self._path, "rb") as f:
                raw = f.read(STATE_BYTES_MAX + 1)
        except FileNotFoundError:
            return
        try:
            self._set_state(_State.from_json(json.loads(raw)))
        except (ValueError, KeyError, TypeError, CoordinatorError) as exc:
            raise CoordinatorError(f"{self._path} is unreadable: {exc}") from exc

    async def close(self) -> None:
        return None

    def _commit_locked(self, state: _State) -> None:
        try:
            write_atomic(self._path, json.dumps(state.to_json(), indent=1, sort_keys=True).encode(),
                         mode=STATE_FILE_MODE)
        except OSError as exc:
            if is_no_space(exc):
                raise StorageFullError(f"metadata not saved: {exc}") from exc
            raise
        self._set_state(state)

    def _set_state(self, state: _State) -> None:
        self._state = state
        self._topic_ids = {meta.topic_id: name for name, meta in state.topics.items()}

    def _topic(self, name: str) -> TopicMetadata:
        meta = self._state.topics.get(name)
        if meta is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return meta

    # ---- topics --------------------------------------------------------------------------------

    async def create_topic(self, spec: TopicSpec, owner: str | None, *, on_node: int | None = None,
                           replicas: tuple[int, ...] | None = None) -> TopicMetadata:
        replication = spec.replication_factor or 1
        if replication > 1:
            raise InvalidTopicError(f"replication factor {replication} exceeds the 1 node of this cluster")
        async with self._lock:
            if spec.name in self._state.topics:
                raise TopicExistsError(f"{spec.name!r} already exists")
            meta = TopicMetadata(spec.name, uuid.uuid4().hex, spec.partitions, replication, spec.kind,
                                 dict(spec.config), owner, time.time_ns() // 1_000_000)
            state = self._state
            self._commit_locked(dataclasses.replace(state, topics={**state.topics, spec.name: meta}))
            return meta

    async def delete_topic(self, name: str) -> TopicMetadata:
        async with self._lock:
            meta = self._topic(name)
            state = self._state
            self._commit_locked(dataclasses.replace(
                state, topics={n: t for n, t in state.topics.items() if n != name},
                acls={t: a for t, a in state.acls.items() if t != name}))
            return meta

    async def add_partitions(self, name: str, partitions: int) -> TopicMetadata:
        async with self._lock:
            meta = self._topic(name)
            grown = dataclasses.replace(meta, partitions=check_partition_growth(meta, partitions))
            state = self._state
            self._commit_locked(dataclasses.replace(state, topics={**state.topics, name: grown}))
            return grown

    async def set_topic_config(self, name: str,
                               update: Callable[[TopicMetadata], Mapping[str, Any]]) -> TopicMetadata:
        async with self._lock:
            meta = self._topic(name)
            changed = dataclasses.replace(meta, config=dict(update(meta)))
            state = self._state
            self._commit_locked(dataclasses.replace(state, topics={**state.topics, name: changed}))
            return changed

    async def get_topic(self, name: str) -> TopicMetadata:
        return self._topic(name)

    def cached_topic(self, name: str) -> TopicMetadata | None:
        return self._state.topics.get(name)

    def cached_topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        name = self._topic_ids.get(topic_id)
        return None if name is None else self._state.topics.get(name)

    async def list_topics(self) -> list[TopicMetadata]:
        topics = self._state.topics
        return [topics[n] for n in sorted(topics)]

    async def partition_states(self, topic: str) -> list[PartitionState]:
        meta = self._topic(topic)
        me = (self._node.node_id,)
        return [PartitionState(topic, p, me, me, self._node.node_id, LEADER_EPOCH) for p in range(meta.partitions)]

    async def nodes(self) -> list[NodeInfo]:
        return [self._node]

    # ---- users and ACLs ------------------------------------------------------------------------

    async def create_user(self, user: UserRecord) -> None:
        async with self._lock:
            state = self._state
            if user.name in state.users:
                raise UserExistsError(f"user {user.name!r} already exists")
            self._commit_locked(dataclasses.replace(state, users={**state.users, user.name: user}))

    async def find_user(self, name: str) -> UserRecord | None:
        return self._state.users.get(name)

    async def list_users(self) -> list[UserRecord]:
        users = self._state.users
        return [users[n] for n in sorted(users)]

    async def update_user(self, user: UserRecord) -> None:
        async with self._lock:
            state = self._state
            if user.name not in state.users:
                raise UnknownUserError(f"unknown user {user.name!r}")
            self._commit_locked(dataclasses.replace(state, users={**state.users, user.name: user}))

    async def delete_user(self, name: str, *, reassign_to: str | None = None) -> list[str]:
        async with self._lock:
            state = self._state
            if name not in state.users:
                raise UnknownUserError(f"unknown user {name!r}")
            owned = sorted(t.name for t in state.topics.values() if t.owner == name)
            if owned and reassign_to is None:
                raise UserOwnsTopicsError(f"user {name!r} owns {len(owned)} topic(s) {owned[:20]}; "
                                          "reassign them (reassign_to) or delete them first", topics=owned)
            if owned and (reassign_to == name or reassign_to not in state.users):
                raise UnknownUserError(f"cannot reassign topics to {reassign_to!r}: no such other user")
            topics = {n: (dataclasses.replace(t, owner=reassign_to) if t.owner == name else t)
                      for n, t in state.topics.items()}
            acls = {t: {u: p for u, p in a.items() if u != name} for t, a in state.acls.items()}
            heir = reassign_to if reassign_to in state.users and reassign_to != name else None
            self._change_groups_locked([(n, group_without_user(g, name, heir)) for n, g in self._groups.items()
                                        if g.owner == name or name in g.acl])
            self._commit_locked(_State(topics, {n: u for n, u in state.users.items() if n != name}, acls))
            return owned

    async def get_acl(self, topic: str) -> Acl:
        self._topic(topic)
        return self._state.acls.get(topic, {})

    async def set_acl(self, topic: str, user: str, permissions: frozenset[str]) -> Acl:
        async with self._lock:
            self._topic(topic)
            state = self._state
            if user not in state.users:
                raise UnknownUserError(f"unknown user {user!r}")
            acl = {u: p for u, p in state.acls.get(topic, {}).items() if u != user}
            if permissions:
                acl[user] = permissions
            self._commit_locked(dataclasses.replace(state, acls={**state.acls, topic: acl}))
            return acl

    async def set_owner(self, topic: str, owner: str) -> TopicMetadata:
        async with self._lock:
            meta = self._topic(topic)
            state = self._state
            if owner not in state.users:
                raise UnknownUserError(f"unknown user {owner!r}")
            meta = dataclasses.replace(meta, owner=owner)
            self._commit_locked(dataclasses.replace(state, topics={**state.topics, topic: meta}))
            return meta

    # ---- consumer groups (in ``groups.jsonl``, see ``coordinator.group_journal``) -------------

    def _change_groups_locked(self, changes: list[tuple[str, GroupRecord | None]]) -> None:
        """Apply ``changes`` (None deletes) in memory and append them durably; undone if the
        append fails, so a failed save changes nothing."""
        if not changes:
            return
        before = [(name, self._groups.get(name)) for name, _ in changes]
        for name, record in changes:
            self._put_group(name, record)
        try:
            self._journal.write(changes, self._groups)
        except BaseException:
            for name, record in reversed(before):
                self._put_group(name, record)
            raise

    def _put_group(self, name: str, record: GroupRecord | None) -> None:
        """Replace (None: delete) one group record in memory, keeping the owners' counts."""
        old = self._groups.pop(name, None)
        if old is not None and old.owner is not None:
            self._owned[old.owner] -= 1
            if not self._owned[old.owner]:
                del self._owned[old.owner]
        if record is not None:
            self._groups[name] = record
            if record.owner is not None:
                self._owned[record.owner] += 1

    async def get_group(self, name: str) -> GroupRecord | None:
        return self._groups.get(name)

    async def list_group_records(self) -> list[GroupRecord]:
        groups = self._groups
        return [groups[n] for n in sorted(groups)]

    async def count_groups_owned(self, user: str) -> int:
        return self._owned[user]

    async def claim_group(self, name: str, owner: str | None) -> GroupRecord:
        async with self._lock:
            found = self._groups.get(name)
            if found is not None:
                return found
            record = GroupRecord(name, owner, {}, time.time_ns() // 1_000_000)
            self._change_groups_locked([(name, record)])
            return record

    async def set_group_acl(self, name: str, user: str, permissions: frozenset[str]) -> GroupRecord:
        async with self._lock:
            found = self._groups.get(name)
            if found is None:
                raise UnknownGroupRecordError(f"unknown group {name!r}")
            if user not in self._state.users:
                raise UnknownUserError(f"unknown user {user!r}")
            acl = {u: p for u, p in found.acl.items() if u != user}
            if permissions:
                acl[user] = permissions
            record = dataclasses.replace(found, acl=acl)
            self._change_groups_locked([(name, record)])
            return record

    async def delete_group(self, name: str) -> None:
        async with self._lock:
            if name in self._groups:
                self._change_groups_locked([(name, None)])

    # ---- usage records (decision 0298): <data_dir>/usage/<hour>-<node>.json --------------------

    def _usage_path(self, hour_ms: int, node_id: int) -> str:
        return os.path.join(self._usage_dir, f"{hour_ms:0{HOUR_DIGITS}d}-{node_id}.json")

    async def put_usage(self, hour_ms: int, node_id: int, rows: list[list[Any]]) -> None:
        data = json.dumps({"rows": rows}, separators=(",", ":")).encode()
        await asyncio.to_thread(_write_usage, self._usage_dir, self._usage_path(hour_ms, node_id), data)

    async def usage_between(self, from_hour_ms: int, to_ms: int) -> list[tuple[int, int, list[list[Any]]]]:
        return await asyncio.to_thread(_read_usage, self._usage_dir, from_hour_ms, to_ms)

    async def drop_usage_before(self, hour_ms: int) -> None:
        for hour, _node, path in await asyncio.to_thread(_usage_files, self._usage_dir):
            if hour < hour_ms:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


def _write_usage(directory: str, path: str, data: bytes) -> None:
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, data)


def _usage_files(directory: str) -> list[tuple[int, int, str]]:
    """(hour, node, path) of every usage file in ``directory`` (others, and temp files, are left out)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        stem, dot, suffix = name.partition(".")
        hour, dash, node = stem.partition("-")
        if dot and suffix == "json" and dash and len(hour) == HOUR_DIGITS and hour.isdigit() and node.isdigit():
            out.append((int(hour), int(node), os.path.join(directory, name)))
    return out


def _read_usage(directory: str, from_hour_ms: int, to_ms: int) -> list[tuple[int, int, list[list[Any]]]]:
    out = []
    for hour, node, path in sorted(_usage_files(directory)):
        if not from_hour_ms <= hour < to_ms:
            continue
        try:
            with open(path, "rb") as file:
                rows = json.loads(file.read())["rows"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a file this node did not write whole (write_atomic leaves none) or someone changed
        if isinstance(rows, list):
            out.append((hour, node, rows))
    return out
