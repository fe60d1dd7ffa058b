"""Cluster metadata values and their validation (pure: no I/O).

Names follow DESIGN §4: ``[A-Za-z0-9._-]{1,200}``, not ``.`` or ``..``, and names starting with
``__`` are reserved for internal topics. Topic config is validated against ``LogConfig`` (the
storage keys) plus the queue keys, so a bad config is refused before anything is created; user
topics take ``cleanup_policy`` ``delete``, ``compact`` or ``compact,delete`` (decision 0321),
queues ``delete`` only.

A user's topic config is held to ``TOPIC_CONFIG_BOUNDS`` (decision 0156), narrower than what the
storage engine accepts: a one-byte segment or a 1 ms roll would make a partition roll, index or
fsync on every produce. Stored configs from before the bounds are clamped into them when a topic
is opened (``clamp_config``), so they still open and no longer misbehave.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from coordinator.errors import InvalidTopicError
from coordinator.leader_racks import LEADER_RACKS_KEY, RACK_CHARS_MAX, parse_leader_racks
from segments.batch import BATCH_RECORDS_BYTES_MAX, HEADER_SIZE
from segments.config import KIB, MIB, SEGMENT_BYTES_MAX, LogConfig, config_int
from segments.errors import InvalidArgumentError
from segments.partitioning import KEY_HASH_KEY, KEY_HASHES

TopicKind = Literal["topic", "queue"]
NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9._-]{1,200}")
INTERNAL_PREFIX: Final = "__"
PARTITIONS_MAX: Final = 1024
REPLICATION_FACTOR_MAX: Final = 16
# The id of the topic a queue's dead letters go to (decision 0173): set by the broker, never by a client.
DEAD_LETTER_ID_KEY: Final = "dead_letter_topic_id"
QUEUE_CONFIG_KEYS: Final = frozenset({"max_deliveries", "dead_letter_topic", "visibility_timeout_ms",
                                      DEAD_LETTER_ID_KEY})
# Read by the broker (replication rules, produce de-duplication), not by the storage engine.
REPLICATION_CONFIG_KEYS: Final = frozenset({"min_insync_replicas", "dedup_window_ms", LEADER_RACKS_KEY})
DEDUP_WINDOW_MS_MAX: Final = 86_400_000
# How far a record's timestamp may lie after (before) the broker's clock at produce, in ms; -1 is
# no bound (decision 0221: Kafka's message.timestamp.after.max.ms and .before.max.ms, same defaults).
TIMESTAMP_AFTER_KEY: Final = "timestamp_after_max_ms"
TIMESTAMP_BEFORE_KEY: Final = "timestamp_before_max_ms"
TIMESTAMP_AFTER_MS_DEFAULT: Final = 3_600_000
TIMESTAMP_BEFORE_MS_DEFAULT: Final = -1
TIMESTAMP_WINDOW_KEYS: Final = frozenset({TIMESTAMP_AFTER_KEY, TIMESTAMP_BEFORE_KEY})
# Whether the topic's new batches are encrypted at rest (``on``/``off``; absent: on when the node has
# a key ring; decision 0316). Read by the broker when it appends, not by the storage engine.
ENCRYPTION_CONFIG_KEY: Final = "encryption"
ENCRYPTION_CONFIG_VALUES: Final = ("on", "off")
DEAD_LETTER_SUFFIX: Final = ".dlq"
MAX_DELIVERIES_DEFAULT: Final = 5
VISIBILITY_TIMEOUT_MS_DEFAULT: Final = 30_000
VISIBILITY_TIMEOUT_MS_MIN: Final = 10
VISIBILITY_TIMEOUT_MS_MAX: Final = 12 * 3600 * 1000
# Topics may be compacted by key (decision 0321; internal topics compact by snapshot instead, 0143);
# a queue's messages are acknowledged by offset, so compaction would drop unacknowledged ones.
QUEUE_CLEANUP_POLICY: Final = "delete"
SEGMENT_BYTES_MIN: Final = MIB
SEGMENT_MS_MIN: Final = 60_000
# An index fills (and forces a roll) after at least (index bytes / 12-byte time entry) * interval
# bytes of log: 64 KiB and 256 bytes give 1.3 MiB, so the index never rolls sooner than the size floor.
SEGMENT_INDEX_BYTES_MIN: Final = 64 * KIB
SEGMENT_INDEX_BYTES_MAX: Final = 64 * MIB
INDEX_INTERVAL_BYTES_MIN: Final = 256
INDEX_INTERVAL_BYTES_MAX: Final = MIB
FLUSH_MS_MIN: Final = 100
# Rolled segments keep their files open until their interval fsync (decision 0147): an hour bounds it.
FLUSH_MS_MAX: Final = 3_600_000
DURATION_MS_MAX: Final = 2**62
ConfigBounds = Mapping[str, tuple[int, int]]
# Inclusive (least, greatest) per storage key a user may set; keys not listed keep LogConfig's ranges.
TOPIC_CONFIG_BOUNDS: Final[ConfigBounds] = {
    "segment_bytes": (SEGMENT_BYTES_MIN, SEGMENT_BYTES_MAX),
    "segment_ms": (SEGMENT_MS_MIN, DURATION_MS_MAX),
    "segment_index_bytes": (SEGMENT_INDEX_BYTES_MIN, SEGMENT_INDEX_BYTES_MAX),
    "index_interval_bytes": (INDEX_INTERVAL_BYTES_MIN, INDEX_INTERVAL_BYTES_MAX),
    "flush_ms": (FLUSH_MS_MIN, FLUSH_MS_MAX),
    "max_batch_bytes": (HEADER_SIZE, BATCH_RECORDS_BYTES_MAX),
}


def topic_config_bounds(segment_bytes_min: int = SEGMENT_BYTES_MIN) -> dict[str, tuple[int, int]]:
    """``TOPIC_CONFIG_BOUNDS`` with the node's own floor for ``segment_bytes`` (an operator may
    lower it, for tests or tiny deployments, as Kafka's ``internal.segment.bytes`` does)."""
    return {**TOPIC_CONFIG_BOUNDS, "segment_bytes": (segment_bytes_min, SEGMENT_BYTES_MAX)}


def check_config_bounds(config: Mapping[str, Any], bounds: ConfigBounds) -> None:
    """Raise ``InvalidTopicError`` naming the first key of a user's ``config`` whose value lies
    outside ``bounds`` (checked before the storage engine's own, wider, ranges)."""
    for key, raw in config.items():
        if key not in bounds:
            continue
        try:
            value = config_int(key, raw)
        except InvalidArgumentError as exc:
            raise InvalidTopicError(str(exc)) from exc
        low, high = bounds[key]
        if not low <= value <= high:
            raise InvalidTopicError(f"config.{key} must be in [{low}, {high}], not {value}",
                                    field=f"config.{key}", minimum=low, maximum=high)


# Never lowered for a stored topic: the log scans and recovers with this limit, so batches stored
# under a larger one would read as corrupt and be cut (the bound applies to new topics only).
NOT_CLAMPED: Final = frozenset({"max_batch_bytes"})


def clamp_config(config: LogConfig, bounds: ConfigBounds) -> LogConfig:
    """``config`` with every bounded key moved into its bounds (a topic stored before them),
    except the keys that describe what is already stored (``NOT_CLAMPED``)."""
    changes = {key: min(max(getattr(config, key), low), high) for key, (low, high) in bounds.items()
               if key not in NOT_CLAMPED}
    return dataclasses.replace(config, **changes)


def validate_name(name: object, *, what: str = "topic", internal: bool = False) -> str:
    """Return ``name`` if it is a legal topic/queue name, else raise ``InvalidTopicError``."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or name in (".", ".."):
        raise InvalidTopicError(f"{what} name must match [A-Za-z0-9._-]{{1,200}} and not be . or ..: {name!r}")
    if name.startswith(INTERNAL_PREFIX) and not internal:
        raise InvalidTopicError(f"{what} names starting with {INTERNAL_PREFIX!r} are reserved: {name!r}")
    return name


def validate_rack(rack: object) -> str | None:
    """A reader's or node's rack: None for none (absent or empty), else printable text of at most
    ``RACK_CHARS_MAX`` characters (``InvalidArgumentError`` otherwise)."""
    if rack is None or rack == "":
        return None
    if not isinstance(rack, str) or len(rack) > RACK_CHARS_MAX or not rack.isprintable():
        raise InvalidArgumentError(f"a rack is printable text of at most {RACK_CHARS_MAX} characters, "
                                   f"not {str(rack)[:40]!r}")
    return rack


@dataclasses.dataclass(frozen=True, slots=True)
class TopicSpec:
    """What a client asks for when it creates a topic or queue."""

    name: str
    partitions: int
    replication_factor: int | None
    kind: TopicKind
    config: Mapping[str, Any]

    @classmethod
    def parse(cls, body: object, *, base_config: LogConfig,
              bounds: ConfigBounds = TOPIC_CONFIG_BOUNDS) -> TopicSpec:
        """Validate a create request body (already decoded JSON); the storage keys it sets must lie
        within ``bounds``."""
        if not isinstance(body, dict):
            raise InvalidTopicError("the request body must be a JSON object")
        unknown = set(body) - {"name", "partitions", "replication_factor", "kind", "config"}
        if unknown:
            raise InvalidTopicError(f"unknown fields: {sorted(unknown)}")
        name = validate_name(body.get("name"))
        partitions = _positive_int(body.get("partitions", 1), "partitions", PARTITIONS_MAX)
        rf = body.get("replication_factor")
        replication = None if rf is None else _positive_int(rf, "replication_factor", REPLICATION_FACTOR_MAX)
        kind = body.get("kind", "topic")
        if kind not in ("topic", "queue"):
            raise InvalidTopicError(f"kind must be topic or queue, not {kind!r}")
        config = body.get("config", {})
        if not isinstance(config, dict):
            raise InvalidTopicError("config must be an object")
        if DEAD_LETTER_ID_KEY in config:
            raise InvalidTopicError(f"config.{DEAD_LETTER_ID_KEY} is set by the broker, not by clients")
        spec = cls(name, partitions, replication, kind, dict(config))
        check_config_bounds(config, bounds)
        policy = spec.log_config(base_config).cleanup_policy
        if kind == "queue" and policy != QUEUE_CLEANUP_POLICY:
            raise InvalidTopicError(f"cleanup_policy {policy!r} is for topics; queues support {QUEUE_CLEANUP_POLICY!r} "
                                    "(retention by retention_ms and retention_bytes)", field="config.cleanup_policy")
        spec.queue_settings()
        spec.check_min_insync()
        spec.check_timestamp_window()
        if LEADER_RACKS_KEY in spec.config and parse_leader_racks(spec.config[LEADER_RACKS_KEY]) and kind == "queue":
            # A queue's partitions and its state log are led by one node (decision 0198); a rack
            # preference on the queue alone would part them (decision 0310).
            raise InvalidTopicError(f"config.{LEADER_RACKS_KEY} applies to topics, not queues",
                                    field=f"config.{LEADER_RACKS_KEY}")
        spec.check_encryption()
        spec.check_key_hash()
        return spec

    def check_key_hash(self) -> None:
        """``key_hash`` is one of ``segments.partitioning.KEY_HASHES``."""
        value = self.config.get(KEY_HASH_KEY)
        if value is not None and value not in KEY_HASHES:
            raise InvalidTopicError(f"config.{KEY_HASH_KEY} must be one of {', '.join(KEY_HASHES)}, not {value!r}",
                                    field=f"config.{KEY_HASH_KEY}")

    def check_encryption(self) -> None:
        """``encryption`` is ``on`` or ``off``."""
        value = self.config.get(ENCRYPTION_CONFIG_KEY)
        if value is not None and value not in ENCRYPTION_CONFIG_VALUES:
            raise InvalidTopicError(f"config.{ENCRYPTION_CONFIG_KEY} must be 'on' or 'off', not {value!r}",
                                    field=f"config.{ENCRYPTION_CONFIG_KEY}")

    def check_timestamp_window(self) -> None:
        """``timestamp_after_max_ms`` and ``timestamp_before_max_ms`` are whole numbers of
        milliseconds from 0 to ``DURATION_MS_MAX``, or -1 for no bound."""
        for key in sorted(TIMESTAMP_WINDOW_KEYS):
            value = self.config.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not -1 <= value <= DURATION_MS_MAX):
                raise InvalidTopicError(f"config.{key} must be an integer in [0, {DURATION_MS_MAX}], or -1 for no "
                                        f"bound, not {value!r}", field=f"config.{key}", minimum=-1,
                                        maximum=DURATION_MS_MAX)

    def check_min_insync(self) -> None:
        """``min_insync_replicas`` is a whole number from 1 to the replication factor;
        ``dedup_window_ms`` one from 0 (no de-duplication) to a day."""
        window = self.config.get("dedup_window_ms")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or not 0 <= window <= DEDUP_WINDOW_MS_MAX):
            raise InvalidTopicError(f"config.dedup_window_ms must be an integer in [0, {DEDUP_WINDOW_MS_MAX}], "
                                    f"not {window!r}", field="config.dedup_window_ms", minimum=0,
                                    maximum=DEDUP_WINDOW_MS_MAX)
        value = self.config.get("min_insync_replicas")
        if value is None:
            return
        top = self.replication_factor or REPLICATION_FACTOR_MAX
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise InvalidTopicError(f"config.min_insync_replicas must be an integer in [1, {top}], not {value!r}",
                                    field="config.min_insync_replicas", minimum=1, maximum=top)

    def log_config(self, base: LogConfig) -> LogConfig:
        """The storage config of this topic over the node's defaults."""
        storage = {k: v for k, v in self.config.items()
                   if k not in QUEUE_CONFIG_KEYS and k not in REPLICATION_CONFIG_KEYS
                   and k not in TIMESTAMP_WINDOW_KEYS and k not in (ENCRYPTION_CONFIG_KEY, KEY_HASH_KEY)}
        try:
            return LogConfig.from_mapping(storage, base)
        except InvalidArgumentError as exc:
            raise InvalidTopicError(str(exc)) from exc

    def queue_settings(self) -> dict[str, Any]:
        """``max_deliveries``, ``dead_letter_topic`` and ``visibility_timeout_ms`` for a queue
        (empty for a topic); the dead-letter topic's id is ``dead_letter_id(meta)``."""
        queue_keys = {k for k in self.config if k in QUEUE_CONFIG_KEYS}
        if self.kind == "topic":
            if queue_keys:
                raise InvalidTopicError(f"{sorted(queue_keys)} apply to queues only")
            return {}
        dead_letter = validate_name(self.config.get("dead_letter_topic", self.name + DEAD_LETTER_SUFFIX),
                                    what="dead letter topic")
        if dead_letter == self.name:
            raise InvalidTopicError("a queue cannot be its own dead letter topic")
        visibility = self.config.get("visibility_timeout_ms", VISIBILITY_TIMEOUT_MS_DEFAULT)
        if isinstance(visibility, bool) or not isinstance(visibility, int) \
                or not VISIBILITY_TIMEOUT_MS_MIN <= visibility <= VISIBILITY_TIMEOUT_MS_MAX:
            raise InvalidTopicError(f"visibility_timeout_ms must be an integer in [{VISIBILITY_TIMEOUT_MS_MIN}, "
                                    f"{VISIBILITY_TIMEOUT_MS_MAX}], not {visibility!r}")
        return {
            "max_deliveries": _positive_int(self.config.get("max_deliveries", MAX_DELIVERIES_DEFAULT),
                                            "max_deliveries", 1000),
            "dead_letter_topic": dead_letter,
            "visibility_timeout_ms": visibility,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionState:
    """Placement and leadership of one partition; ``elr``: the eligible leader replicas outside
    the ISR (``coordinator.eligibility``)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    elr: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic as the coordinator stores it."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    kind: TopicKind
    config: Mapping[str, Any]
    owner: str | None
    created_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "topic_id": self.topic_id, "partitions": self.partitions,
            "replication_factor": self.replication_factor, "kind": self.kind, "config": dict(self.config),
            "owner": self.owner, "created_ms": self.created_ms,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TopicMetadata:
        return cls(raw["name"], raw["topic_id"], int(raw["partitions"]), int(raw["replication_factor"]),
                   raw["kind"], dict(raw["config"]), raw.get("owner"), int(raw["created_ms"]))


@dataclasses.dataclass(frozen=True, slots=True)
class NodeInfo:
    """How to reach a node (DESIGN §5 ``nodes/<id>``)."""

    node_id: int
    http_url: str
    rpc_address: str
    rack: str | None = None
    grpc_address: str = ""
    started_ms: int = 0
    kafka_address: str = ""  # empty: the node has no Kafka listener

    def to_json(self) -> dict[str, Any]:
        out = {"node_id": self.node_id, "http_url": self.http_url, "rpc_address": self.rpc_address,
               "grpc_address": self.grpc_address, "rack": self.rack, "started_ms": self.started_ms}
        if self.kafka_address:
            out["kafka_address"] = self.kafka_address
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> NodeInfo:
        rack = raw.get("rack")
        return cls(int(raw["node_id"]), str(raw["http_url"]), str(raw["rpc_address"]),
                   None if rack is None else str(rack), str(raw.get("grpc_address", "")),
                   int(raw.get("started_ms", 0)), str(raw.get("kafka_address", "")))


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSession:
    """One registration of a live node (decision 0260): its addresses, the lease that carries it,
    and the revision of ``nodes/<id>`` it was read at (evidence about it counts for it alone)."""

    info: NodeInfo
    lease: int
    mod_revision: int


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterNode:
    """A node the cluster knows, and whether its session lease is live now."""

    info: NodeInfo
    alive: bool


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataChange:
    """What a coordinator's metadata cache just changed: handed to ``Coordinator.on_change``
    listeners so the node reconciles (opens or drops partitions, stands for election)."""

    topics: frozenset[str] = frozenset()
    nodes: bool = False
    session_lost: bool = False


def dead_letter_id(meta: TopicMetadata) -> str | None:
    """The id of the topic ``meta``'s dead letters go to; None for a queue created before queues
    were bound to it by id (it is bound when the queue is opened, decision 0173)."""
    value = meta.config.get(DEAD_LETTER_ID_KEY)
    return value if isinstance(value, str) else None


def check_partition_growth(meta: TopicMetadata, partitions: object) -> int:
    """The new partition count of ``meta`` if ``partitions`` is a legal one (more than now, at
    most ``PARTITIONS_MAX``), else ``InvalidTopicError``."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) \
            or not meta.partitions < partitions <= PARTITIONS_MAX:
        raise InvalidTopicError(f"{meta.name!r} has {meta.partitions} partitions; the new count must be an "
                                f"integer in ({meta.partitions}, {PARTITIONS_MAX}], not {partitions!r}")
    return partitions


def _positive_int(value: object, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidTopicError(f"{what} must be an integer in [1, {high}], not {value!r}")
    return value
