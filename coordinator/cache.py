"""The metadata cache of an etcd coordinator (pure: no I/O).

It holds every key under the cluster prefix as of one etcd ``revision``, fed by a full load
(``reset``) and then by watch batches (``apply``) in revision order, and answers the request
path's lookups without a round trip. Invariants: ``revision`` never goes back; a topic exists
only once its ``topics/`` key does (its partitions are written first); a partition record whose
``topic_id`` is not its topic's current one is stale and ignored. A value this version cannot
decode is skipped (kept as raw bytes for guards) rather than failing the whole cache. A put of a
sealed kind whose seal does not verify (``etcd_seal``, decision 0225) is ignored: the key keeps
its last verified value (absent when it never had one), and the put is logged and counted in
``rejected_records``; the raw entry is kept, so a node's next guarded write replaces it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from coordinator.errors import CoordinatorError
from coordinator.etcd_keys import NODE_KINDS, TOPIC_KINDS, Key, LeaderRecord, PartitionRecord, parse_key
from coordinator.etcd_seal import RecordSeal, SealError
from coordinator.models import MetadataChange, NodeInfo, PartitionState, TopicMetadata
from coordinator.users import Acl, GroupRecord, UserRecord, acl_from_json

log = logging.getLogger(__name__)
NO_LEADER: Final = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One key as etcd holds it (``key`` relative to the cluster prefix)."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int = 0


class MetadataCache:
    def __init__(self, seal: RecordSeal | None = None) -> None:
        self.revision = 0
        self._seal = seal or RecordSeal(None, "")
        self.rejected_records = 0
        self.unsealed: set[str] = set()  # keys of a sealed kind stored with no seal at all
        self._entries: dict[str, Entry] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._topic_ids: dict[str, str] = {}  # topic id -> name, of the topics in ``_topics``
        self._partitions: dict[tuple[str, int], PartitionRecord] = {}
        self._leaders: dict[tuple[str, int], LeaderRecord] = {}
        self._nodes: dict[int, NodeInfo] = {}
        self._members: dict[int, NodeInfo] = {}
        self._users: dict[str, UserRecord] = {}
        self._acls: dict[str, Acl] = {}
        self._groups: dict[str, GroupRecord] = {}
        self._topic_changes = 0  # batches that touched a topic, partition or leader key
        self._leaderless: tuple[int, int] = (-1, 0)  # (_topic_changes, count) when last counted

    # ---- feeding -------------------------------------------------------------------------------

    def reset(self, entries: Iterable[Entry], revision: int) -> MetadataChange:
        """Replace everything with a full load at ``revision``; the change names what differs."""
        fresh = {e.key: e for e in entries}
        changes: list[tuple[str, Entry | None]] = [(k, None) for k in self._entries if k not in fresh]
        changes += [(k, e) for k, e in fresh.items() if self._entries.get(k) != e]
        change = self._apply_all(changes)
        self.revision = max(self.revision, revision)
        return change

    def apply(self, changes: Iterable[tuple[str, Entry | None]], revision: int) -> MetadataChange:
        """Apply a watch batch (a put is an ``Entry``, a delete is None) up to ``revision``."""
        change = self._apply_all(list(changes))
        self.revision = max(self.revision, revision)
        return change

    def advance(self, revision: int) -> None:
        """Every event up to ``revision`` has been applied (a watch progress notification)."""
        self.revision = max(self.revision, revision)

    def _apply_all(self, changes: list[tuple[str, Entry | None]]) -> MetadataChange:
        topics: set[str] = set()
        nodes = False
        for key, entry in changes:
            parsed = parse_key(key)
            if entry is None:
                self._entries.pop(key, None)
            else:
                self._entries[key] = entry
            if parsed is None:
                continue
            self._decode(parsed, entry)
            if parsed.kind in TOPIC_KINDS:
                topics.add(parsed.name)
                self._topic_changes += 1
            elif parsed.kind in NODE_KINDS:
                nodes = True
        return MetadataChange(frozenset(topics), nodes)

    def _decode(self, key: Key, entry: Entry | None) -> None:
        """Keep the decoded view of ``key`` in step with its entry (an undecodable value reads as
        absent)."""
        value: Any = None
        self.unsealed.discard(key.relative())
        if entry is not None:
            try:
                value = _DECODERS[key.kind](key, self._seal.open(key.relative(), entry.value))
            except SealError as exc:  # the write is ignored: the last verified value, if any, stays
                self.rejected_records += 1
                if exc.missing:
                    self.unsealed.add(key.relative())
                log.warning("ignoring metadata key %s: %s (not written by a node holding the cluster's key)",
                            key.relative(), exc)
                return
            except (ValueError, KeyError, TypeError, CoordinatorError) as exc:
                log.warning("skipping undecodable metadata key %s: %s", key.relative(), exc)
        target: dict[Any, Any]
        index: Any = key.name
        if key.kind in ("partitions", "leaders"):
            target, index = (self._partitions if key.kind == "partitions" else self._leaders), (key.name, key.partition)
        elif key.kind in ("nodes", "members"):
            if not key.name.isdigit():
                return
            target, index = (self._nodes if key.kind == "nodes" else self._members), int(key.name)
        elif key.kind == "locks":
            return
        else:
            named: dict[str, dict[Any, Any]] = {"topics": self._topics, "users": self._users, "acls": self._acls,
                                                "groups": self._groups}
            target = named[key.kind]
        if key.kind == "topics":
            self._index_topic_id(key.name, value)
        if value is None:
            target.pop(index, None)
        else:
            target[index] = value

    def _index_topic_id(self, name: str, meta: TopicMetadata | None) -> None:
        """Keep ``_topic_ids`` in step as topic ``name`` becomes ``meta`` (None: gone)."""
        old = self._topics.get(name)
        if old is not None and (meta is None or meta.topic_id != old.topic_id) \
                and self._topic_ids.get(old.topic_id) == name:
            del self._topic_ids[old.topic_id]
        if meta is not None:
            self._topic_ids[meta.topic_id] = name

    # ---- lookups -------------------------------------------------------------------------------

    def entry(self, key: Key) -> Entry | None:
        return self._entries.get(key.relative())

    def mod_revision(self, key: Key) -> int:
        """The key's mod revision, 0 when absent (what an etcd guard compares)."""
        found = self._entries.get(key.relative())
        return 0 if found is None else found.mod_revision

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        """The live topic with this id (None: no live topic has it, e.g. a deleted one's)."""
        name = self._topic_ids.get(topic_id)
        meta = None if name is None else self._topics.get(name)
        return meta if meta is not None and meta.topic_id == topic_id else None

    def topics(self) -> list[TopicMetadata]:
        return [self._topics[n] for n in sorted(self._topics)]

    def partition_record(self, topic: str, partition: int) -> PartitionRecord | None:
        """The live record of a partition of an existing topic (None: unknown or stale)."""
        meta = self._topics.get(topic)
        record = self._partitions.get((topic, partition))
        if meta is None or record is None or record.topic_id != meta.topic_id or not 0 <= partition < meta.partitions:
            return None
        return record

    def leader(self, topic: str, partition: int) -> LeaderRecord | None:
        return self._leaders.get((topic, partition))

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        record = self.partition_record(topic, partition)
        if record is None:
            return None
        leader = self._leaders.get((topic, partition))
        return PartitionState(topic, partition, record.replicas, record.isr,
                              NO_LEADER if leader is None else leader.node, record.leader_epoch, record.elr)

    def partitions(self, topic: str) -> list[PartitionState] | None:
        """One state per partition of ``topic`` (None: no such topic); a partition whose record
        is missing shows no replicas and no leader."""
        meta = self._topics.get(topic)
        if meta is None:
            return None
        out = []
        for p in range(meta.partitions):
            state = self.partition(topic, p)
            out.append(state or PartitionState(topic, p, (), (), NO_LEADER, 0))
        return out

    def leaderless_partitions(self) -> int:
        """How many partitions of the known topics ``partitions`` shows without a leader (no leader
        key, or no live placement record). Counted again only after a topic, partition or leader
        key changed, so that scrapes of a steady cluster cost nothing here."""
        if self._leaderless[0] != self._topic_changes:
            count = 0
            for name, meta in self._topics.items():
                for p in range(meta.partitions):
                    if (name, p) not in self._leaders or self.partition_record(name, p) is None:
                        count += 1
            self._leaderless = (self._topic_changes, count)
        return self._leaderless[1]

    def assignment(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """Replica lists of every live partition (placement balances new ones against it)."""
        out = {}
        for (topic, p) in self._partitions:
            record = self.partition_record(topic, p)
            if record is not None:
                out[(topic, p)] = record.replicas
        return out

    def nodes(self) -> list[NodeInfo]:
        """The live nodes (their ``nodes/`` key is on a live lease), by id."""
        return [self._nodes[i] for i in sorted(self._nodes)]

    def node(self, node_id: int) -> NodeInfo | None:
        return self._nodes.get(node_id)

    def members(self) -> Mapping[int, NodeInfo]:
        """Every node ever registered (latest addresses), by id; live ones override."""
        return {**self._members, **self._nodes}

    def user(self, name: str) -> UserRecord | None:
        return self._users.get(name)

    def users(self) -> list[UserRecord]:
        return [self._users[n] for n in sorted(self._users)]

    def acl(self, topic: str) -> Acl:
        return self._acls.get(topic, {})

    def acls(self) -> Mapping[str, Acl]:
        return self._acls

    def group(self, name: str) -> GroupRecord | None:
        return self._groups.get(name)

    def groups(self) -> list[GroupRecord]:
        return [self._groups[n] for n in sorted(self._groups)]


_DECODERS: Final[dict[str, Callable[[Key, dict[str, Any]], object]]] = {
    "topics": lambda k, v: TopicMetadata.from_json(v),
    "partitions": lambda k, v: PartitionRecord.from_value(v),
    "leaders": lambda k, v: LeaderRecord.from_value(v),
    "nodes": lambda k, v: NodeInfo.from_json(v),
    "members": lambda k, v: NodeInfo.from_json(v),
    "users": lambda k, v: UserRecord.from_json(v),
    "acls": lambda k, v: acl_from_json(v),
    "groups": lambda k, v: GroupRecord.from_json(k.name, v),
    "locks": lambda k, v: None,
}
