"""The etcd key layout of a cluster and the codecs of its values (pure: no I/O).

Every key lives under ``/logbroker/<cluster>/`` (DESIGN §5, decision 0182):
``nodes/<id>`` (leased NodeInfo), ``members/<id>`` (unleased NodeInfo: every node ever
registered), ``topics/<name>``, ``partitions/<topic>/<p>``, ``leaders/<topic>/<p>`` (leased),
``users/<name>``, ``acls/<topic>``, ``groups/<name>`` and ``locks/<topic>`` (a chunked topic
write's guard, leased). Names never hold ``/`` (topic and user name patterns), so a key splits
unambiguously. Usage records live beside the cluster's keys, not under them, so the nodes'
watch of the cluster prefix (and their metadata cache) never carries them:
``/logbroker-usage/<cluster>/usage/<hour, 13 digits>/<node id>`` (decision 0298). Values are
JSON with sorted keys, so equal records encode to equal bytes (the leader and lock guards compare
values).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final, Literal

ROOT: Final = "/logbroker/"
KeyKind = Literal["nodes", "members", "topics", "partitions", "leaders", "users", "acls", "groups", "locks"]
KINDS: Final[frozenset[str]] = frozenset(
    {"nodes", "members", "topics", "partitions", "leaders", "users", "acls", "groups", "locks"})
TOPIC_KINDS: Final = frozenset({"topics", "partitions", "leaders", "acls"})
NODE_KINDS: Final = frozenset({"nodes", "members"})
TWO_PART_KINDS: Final = frozenset({"partitions", "leaders"})


USAGE_ROOT: Final = "/logbroker-usage/"
HOUR_DIGITS: Final = 13


def cluster_prefix(cluster: str) -> str:
    return f"{ROOT}{cluster}/"


def usage_prefix(cluster: str) -> str:
    return f"{USAGE_ROOT}{cluster}/"


def usage_key(hour_ms: int, node_id: int) -> str:
    """A node's record of one hour, relative to ``usage_prefix`` (hours sort as numbers)."""
    return f"usage/{hour_ms:0{HOUR_DIGITS}d}/{node_id}"


def usage_hour_bound(hour_ms: int) -> str:
    """The relative key every record of hours before ``hour_ms`` sorts below."""
    return f"usage/{hour_ms:0{HOUR_DIGITS}d}/"


def parse_usage_key(relative: str) -> tuple[int, int] | None:
    """(hour, node) of a usage record's relative key, None for anything else."""
    parts = relative.split("/")
    if len(parts) != 3 or parts[0] != "usage" or len(parts[1]) != HOUR_DIGITS or not parts[1].isdigit() \
            or not parts[2].isdigit():
        return None
    return int(parts[1]), int(parts[2])


def prefix_range_end(prefix: bytes) -> bytes:
    """The etcd ``range_end`` that selects every key starting with ``prefix``."""
    end = bytearray(prefix)
    for i in reversed(range(len(end))):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[:i + 1])
    return b"\0"


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    """A parsed key relative to the cluster prefix: ``kind`` and its name parts."""

    kind: KeyKind
    name: str
    partition: int = -1

    def relative(self) -> str:
        if self.kind in TWO_PART_KINDS:
            return f"{self.kind}/{self.name}/{self.partition}"
        return f"{self.kind}/{self.name}"


def parse_key(relative: str) -> Key | None:
    """The ``Key`` a relative key names, or None for a key this version does not know."""
    parts = relative.split("/")
    kind = parts[0]
    if kind not in KINDS or not all(parts[1:]):
        return None
    if kind in TWO_PART_KINDS:
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        return Key(kind, parts[1], int(parts[2]))  # type: ignore[arg-type]
    if len(parts) != 2:
        return None
    return Key(kind, parts[1])  # type: ignore[arg-type]


def node_key(node_id: int) -> Key:
    return Key("nodes", str(node_id))


def member_key(node_id: int) -> Key:
    return Key("members", str(node_id))


def topic_key(name: str) -> Key:
    return Key("topics", name)


def partition_key(topic: str, partition: int) -> Key:
    return Key("partitions", topic, partition)


def leader_key(topic: str, partition: int) -> Key:
    return Key("leaders", topic, partition)


def user_key(name: str) -> Key:
    return Key("users", name)


def acl_key(topic: str) -> Key:
    return Key("acls", topic)


def group_key(name: str) -> Key:
    return Key("groups", name)


def lock_key(topic: str) -> Key:
    return Key("locks", topic)


def encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def decode(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionRecord:
    """``partitions/<topic>/<p>``: placement, ISR, eligible leader replicas and the epoch (which
    survives every lease). ``topic_id`` tells a stale key of a deleted-and-recreated topic from
    the live one; ``elr`` is stored only when not empty (records from before it read as empty)."""

    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    elr: tuple[int, ...] = ()

    def encode(self) -> bytes:
        value: dict[str, Any] = {"topic_id": self.topic_id, "replicas": list(self.replicas), "isr": list(self.isr),
                                 "leader_epoch": self.leader_epoch}
        if self.elr:
            value["elr"] = list(self.elr)
        return encode(value)

    @classmethod
    def decode(cls, raw: bytes) -> PartitionRecord:
        return cls.from_value(decode(raw))

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> PartitionRecord:
        return cls(str(value["topic_id"]), tuple(int(r) for r in value["replicas"]),
                   tuple(int(r) for r in value["isr"]), int(value["leader_epoch"]),
                   tuple(int(r) for r in value.get("elr", ())))


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderRecord:
    """``leaders/<topic>/<p>``: who leads, at which epoch (on the leader's lease)."""

    node: int
    epoch: int

    def encode(self) -> bytes:
        return encode({"node": self.node, "epoch": self.epoch})

    @classmethod
    def decode(cls, raw: bytes) -> LeaderRecord:
        return cls.from_value(decode(raw))

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> LeaderRecord:
        return cls(int(value["node"]), int(value["epoch"]))
