"""Kafka's admin APIs on the broker's own paths (``KafkaHandlers.admin``): CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and
DescribeCluster, so that ``AdminClient``s and Kafka's tools manage LogBroker topics.

Why here and thin: a topic made, grown, changed or deleted over Kafka is the one HTTP's
``/v1/topics`` makes, through the same front door (``logbroker.api.BrokerApi``): the caller owns
what they create, the same name rules, holding limits (``topics_max``, ``partitions_max``),
grants and owner-or-admin rule apply, and a LogBroker error becomes its Kafka code through the one
error table (``logbroker.error_codes``). What this module adds is Kafka's spelling: config names
(``CONFIG_NAMES``: Kafka's name where LogBroker has the same setting, LogBroker's own key where
Kafka has none), string values, and the per-topic codes Kafka clients act on (INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_CONFIG), which the node's one ``InvalidTopicError`` does not
tell apart: the request's counts are checked here first, so a later refusal is the config's.

Invariants: every topic or resource a request names gets its answer, in request order (a topic
CreateTopics names twice: one, INVALID_REQUEST), and nothing is created, grown, changed or
deleted for one answered with an error or under ``validate_only``; queues are not Kafka topics
(UNKNOWN_TOPIC_OR_PARTITION, after authorization, as Metadata does not list them); a request
names at most ``ITEMS_MAX`` topics or resources (the rest answered INVALID_REQUEST). A holding
limit answers THROTTLING_QUOTA_EXCEEDED (the table's row for 429). Not served: manual replica
assignments (LogBroker places replicas), broker configs (none are dynamic: an empty list), a
request's ``timeout`` (the node bounds its own wait for new leaders). DeleteTopics v6 may name a
topic by id (``kafka_api.topic_ids``); CreateTopics v7 answers the new topic's id."""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar

from coordinator.errors import InvalidTopicError
from coordinator.leader_racks import LEADER_RACKS_KEY
from coordinator.models import PARTITIONS_MAX, REPLICATION_FACTOR_MAX, TopicSpec, validate_name
from coordinator.topic_config import FIXED_KEYS
from kafka_api import session as sessions
from kafka_api import topic_ids, wire
from kafka_api.session import Session
from kafka_api.topic_ids import ZERO_UUID
from logbroker.api import BrokerApi
from logbroker.api_types import CallContext
from logbroker.errors import ANY_ERROR
from logbroker.kafka_error_numbers import (
    INVALID_CONFIG,
    INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_ENDPOINT_TYPE,
)
from logbroker.node import Node
from segments.config import CONFIG_FLOAT, CONFIG_INT
from segments.partitioning import KEY_HASH_KEY

T = TypeVar("T")
DEFAULT: Final = -1  # CreateTopics' num_partitions and replication_factor: the broker's default
NO_OPERATIONS: Final = -(2**31)  # authorized operations not given
ITEMS_MAX: Final = 1_000  # topics or resources one request may name
MESSAGE_CHARS_MAX: Final = 500
# DescribeConfigs' resource types, config sources and config types; IncrementalAlterConfigs' operations.
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
TOPIC_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE = 1, 5
STRING, INT, LONG, DOUBLE, LIST = 2, 3, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKERS_ENDPOINT: Final = 1  # DescribeCluster's endpoint type (2: controllers, which LogBroker has none of)

# How a value is written: a whole number, a fraction, text, comma-separated text (stored so), or a
# comma-separated list (stored as a list).
ValueKind = Literal["int", "float", "text", "csv", "list"]


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigName:
    """A topic config key as Kafka clients name it, LogBroker's key, and its value's kind."""

    kafka: str
    key: str
    kind: ValueKind
    kafka_type: int  # DescribeConfigs' config_type


CONFIG_NAMES: Final[tuple[ConfigName, ...]] = (
    ConfigName("cleanup.policy", "cleanup_policy", "csv", LIST),
    ConfigName("delete.retention.ms", "delete_retention_ms", "int", LONG),
    ConfigName("flush.ms", "flush_ms", "int", LONG),
    ConfigName("index.interval.bytes", "index_interval_bytes", "int", INT),
    ConfigName("max.compaction.lag.ms", "max_compaction_lag_ms", "int", LONG),
    ConfigName("max.message.bytes", "max_batch_bytes", "int", INT),
    ConfigName("message.timestamp.after.max.ms", "timestamp_after_max_ms", "int", LONG),
    ConfigName("message.timestamp.before.max.ms", "timestamp_before_max_ms", "int", LONG),
    ConfigName("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "float", DOUBLE),
    ConfigName("min.compaction.lag.ms", "min_compaction_lag_ms", "int", LONG),
    ConfigName("min.insync.replicas", "min_insync_replicas", "int", INT),
    ConfigName("retention.bytes", "retention_bytes", "int", LONG),
    ConfigName("retention.ms", "retention_ms", "int", LONG),
    ConfigName("segment.bytes", "segment_bytes", "int", INT),
    ConfigName("segment.index.bytes", "segment_index_bytes", "int", INT),
    ConfigName("segment.ms", "segment_ms", "int", LONG),
    # LogBroker's own, with no Kafka equivalent: under their own names.
    ConfigName("dedup_window_ms", "dedup_window_ms", "int", LONG),
    ConfigName("encryption", "encryption", "text", STRING),
    ConfigName("flush", "flush", "text", STRING),
    ConfigName(LEADER_RACKS_KEY, LEADER_RACKS_KEY, "list", LIST),
    ConfigName(KEY_HASH_KEY, KEY_HASH_KEY, "text", STRING),
)
BY_KAFKA_NAME: Final = {name.kafka: name for name in CONFIG_NAMES}
BY_KEY: Final = {name.key: name for name in CONFIG_NAMES}
# What AlterConfigs (which replaces a topic's whole config) puts back to the default when it does
# not name it; a key that cannot change on a live topic stays as it is, and so do the two a reset
# must never change unasked: encryption at rest, and the batch bound (it only grows).
KEPT_UNLESS_NAMED: Final = frozenset({"encryption", "max_batch_bytes"})
RESETTABLE: Final = tuple(name.key for name in CONFIG_NAMES
                          if name.key not in FIXED_KEYS and name.key not in KEPT_UNLESS_NAMED)


class Refused(Exception):
    """An item of a request answered with ``code`` (and this message); nothing done for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def error_code(exc: BaseException) -> int:
    """A refusal's code, or a LogBroker error's through the one table (``session.error_code``)."""
    return exc.code if isinstance(exc, Refused) else sessions.error_code(exc)


def message_of(exc: BaseException) -> str:
    return str(exc)[:MESSAGE_CHARS_MAX]


# ---- config values ---------------------------------------------------------------------------

def config_value(name: str, value: str | None) -> tuple[str, Any]:
    """A config as a Kafka client sends it (name, string) as LogBroker's (key, value); None stays
    None (the default). ``Refused`` (INVALID_CONFIG) for a name LogBroker has no setting for or a
    value not of its kind (the node checks the ranges)."""
    known = BY_KAFKA_NAME.get(name)
    if known is None:
        raise Refused(INVALID_CONFIG, f"unknown config {name[:100]!r}: LogBroker topics take "
                                      f"{', '.join(sorted(BY_KAFKA_NAME))}")
    if value is None:
        return known.key, None
    text = value.strip()
    if known.kind == "int":
        if not CONFIG_INT.fullmatch(text):
            raise Refused(INVALID_CONFIG, f"{name} must be a whole number, not {value[:40]!r}")
        return known.key, int(text)
    if known.kind == "float":
        if not CONFIG_FLOAT.fullmatch(text):
            raise Refused(INVALID_CONFIG, f"{name} must be a number, not {value[:40]!r}")
        return known.key, float(text)
    if known.kind == "text":
        return known.key, text
    return known.key, _stored_list(known, _items(text))


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _stored_list(known: ConfigName, items: list[str]) -> str | list[str]:
    return ",".join(items) if known.kind == "csv" else items


def kafka_value(value: Any) -> str | None:
    """A LogBroker config value as Kafka's string (a list comma-separated)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def config_entries(effective: Mapping[str, Any], stored: Collection[str],
                   wanted: Collection[str] | None = None) -> list[dict[str, Any]]:
    """A topic's config in force (``described_config``) as DescribeConfigs' entries, by Kafka's
    names where there is one (``wanted``: only those names; None: all), sorted by name; a key
    set on the topic (``stored``) is TOPIC_CONFIG, one left to the default DEFAULT_CONFIG; a key
    that cannot change on a live topic is read-only."""
    entries: list[dict[str, Any]] = []
    for key, value in effective.items():
        known = BY_KEY.get(key)
        name = known.kafka if known is not None else key
        if wanted is not None and name not in wanted:
            continue
        entries.append({"name": name, "value": kafka_value(value), "read_only": key in FIXED_KEYS,
                        "config_source": TOPIC_CONFIG_SOURCE if key in stored else DEFAULT_CONFIG_SOURCE,
                        "is_sensitive": False, "synonyms": [],
                        "config_type": known.kafka_type if known is not None else STRING, "documentation": None})
    return sorted(entries, key=lambda entry: str(entry["name"]))


def incremental_changes(configs: Iterable[Any], effective: Mapping[str, Any] | None) -> dict[str, Any]:
    """IncrementalAlterConfigs' operations as the changes ``alter_topic_config`` takes: SET a
    value, DELETE (back to the default), APPEND to or SUBTRACT from a list config, over its value
    in force (``effective``; needed only when an operation appends or subtracts)."""
    changes: dict[str, Any] = {}
    for config in configs:
        name, operation = str(config.name), int(config.config_operation)
        key, value = config_value(name, None if operation == DELETE else config.value)
        if key in changes:
            raise Refused(INVALID_REQUEST, f"{name} is named twice")
        if operation in (SET, DELETE):
            changes[key] = value
            continue
        known = BY_KEY[key]
        if operation not in (APPEND, SUBTRACT):
            raise Refused(INVALID_REQUEST, f"config operation {operation} is not one of 0-3")
        if known.kind not in ("csv", "list"):
            raise Refused(INVALID_CONFIG, f"{name} is not a list: it can be set or deleted, not appended to")
        assert effective is not None, "appending needs the value in force"
        current = _items(kafka_value(effective.get(key)) or "")
        given = _items(kafka_value(value) or "")
        items = current + [i for i in given if i not in current] if operation == APPEND \
            else [i for i in current if i not in given]
        changes[key] = _stored_list(known, items)
    return changes


def needs_effective(configs: Iterable[Any]) -> bool:
    return any(int(config.config_operation) in (APPEND, SUBTRACT) for config in configs)


# ---- brokers -----------------------------------------------------------------------------------

async def live_brokers(node: Node) -> list[dict[str, Any]]:
    """The brokers Kafka clients are told of (Metadata's spelling): every live node with a Kafka
    address, its LogBroker node id as the broker id."""
    brokers = []
    for member in await node.coordinator.cluster_nodes():
        where = wire.host_port(member.info.kafka_address)
        if member.alive and where is not None:
            brokers.append({"node_id": member.info.node_id, "host": where[0], "port": where[1],
                            "rack": member.info.rack})
    return brokers


async def _each_topic(resources: Sequence[Any], alter: Callable[[Any], Awaitable[None]]) -> list[dict[str, Any]]:
    """``alter`` each resource, a topic within the request's bound; one result per resource."""
    results = []
    for resource, within in bounded(resources):
        kind, name = int(resource.resource_type), str(resource.resource_name)
        try:
            if not within:
                raise too_many()
            check_topic_resource(kind)
            await alter(resource)
        except (Refused, *ANY_ERROR) as exc:
            results.append(_resource_result(kind, name, exc))
            continue
        results.append(_resource_result(kind, name, None))
    return results


def bounded(items: Sequence[T]) -> Iterator[tuple[T, bool]]:
    """Each item and whether it is within ``ITEMS_MAX``."""
    for index, item in enumerate(items):
        yield item, index < ITEMS_MAX


def too_many() -> Refused:
    return Refused(INVALID_REQUEST, f"a request names at most {ITEMS_MAX} topics or resources")


def check_topic_resource(kind: int) -> None:
    if kind != TOPIC_RESOURCE:
        raise Refused(INVALID_REQUEST, f"resource type {kind}: LogBroker changes topic configs (2) only; "
                                             "a node's settings are fixed when it starts")


class AdminHandlers:
    """The admin APIs' handlers (each takes the connection's ``Session`` and the decoded request
    and answers one dict spelled as the newest version, like ``KafkaHandlers``)."""

    def __init__(self, node: Node, api: BrokerApi) -> None:
        self.node = node
        self.api = api

    # ---- topics ----------------------------------------------------------------------------------

    async def create_topics(self, session: Session, request: Any) -> dict[str, Any]:
        ctx = session.context()
        validate_only = bool(request.validate_only)
        named = collections.Counter(str(topic.name) for topic in request.topics)
        live = sum(1 for member in await self.node.coordinator.cluster_nodes() if member.alive)
        results: list[dict[str, Any]] = []
        answered: set[str] = set()
        for topic, within in bounded(request.topics):
            name = str(topic.name)
            if name in answered:
                continue
            answered.add(name)
            if not within:
                results.append(_creation_error(name, too_many()))
            elif named[name] > 1:
                results.append(_creation_error(name, Refused(INVALID_REQUEST, f"{name!r} is named twice")))
            else:
                results.append(await self._create(ctx, topic, live, validate_only))
        return {"throttle_time": 0, "topics": results}

    async def _create(self, ctx: CallContext, topic: Any, live: int, validate_only: bool) -> dict[str, Any]:
        name = str(topic.name)
        try:
            body = self._creation_body(topic, live)
            if validate_only:
                spec = await self.api.check_create_topic(ctx, body)
                return _created(name, spec.partitions, spec.replication_factor or DEFAULT, None)
            described = await self.api.create_topic(ctx, body)
        except (Refused, *ANY_ERROR) as exc:
            return _creation_error(name, exc)
        stored = body.get("config", {})
        return {**_created(name, described["partition_count"], described["replication_factor"],
                           config_entries(described["config"], stored)),
                "topic_id": topic_ids.as_uuid(str(described["topic_id"]))}

    def _creation_body(self, topic: Any, live: int) -> dict[str, Any]:
        """``POST /v1/topics``' body for a CreateTopics topic; ``Refused`` with Kafka's code for a
        count, placement or config the node would refuse (``InvalidTopicError`` for the name)."""
        body: dict[str, Any] = {"name": validate_name(str(topic.name))}
        if topic.assignments:
            raise Refused(INVALID_REPLICA_ASSIGNMENT, "LogBroker places replicas itself: give num_partitions and "
                                                      "replication_factor, not assignments")
        partitions, replication = int(topic.num_partitions), int(topic.replication_factor)
        if partitions != DEFAULT:
            if not 1 <= partitions <= PARTITIONS_MAX:
                raise Refused(INVALID_PARTITIONS, f"num_partitions must be in [1, {PARTITIONS_MAX}] (or -1 for the "
                                                  f"default, 1), not {partitions}")
            body["partitions"] = partitions
        if replication != DEFAULT:
            top = min(REPLICATION_FACTOR_MAX, live)
            if not 1 <= replication <= top:
                raise Refused(INVALID_REPLICATION_FACTOR, f"replication_factor must be in [1, {top}] ({live} live "
                                                          f"nodes), or -1 for the default, not {replication}")
            body["replication_factor"] = replication
        given = [config_value(str(entry.name), entry.value) for entry in topic.configs]
        if len({key for key, _ in given}) < len(given):
            raise Refused(INVALID_CONFIG, "a config is named twice")
        config = {key: value for key, value in given if value is not None}  # None: the default
        if config:
            body["config"] = config
            node = self.node
            try:  # the node's own parser: counts and name are good, so what it refuses is the config
                spec = TopicSpec.parse(body, base_config=node.base_log_config, bounds=node.config_bounds)
                node.at_rest.check_topic_config(spec.config)
            except InvalidTopicError as exc:
                raise Refused(INVALID_CONFIG, message_of(exc)) from None
        return body

    async def delete_topics(self, session: Session, request: Any) -> dict[str, Any]:
        ctx = session.context()
        wanted: list[tuple[str | None, uuid.UUID]] = \
            [(t.name, t.topic_id) for t in request.topics] if hasattr(request, "topics") \
            else [(name, ZERO_UUID) for name in request.topic_names]
        responses = []
        for (name, topic_id), within in bounded(wanted):
            if name is None:
                responses.append(await self._delete_by_id(ctx, topic_id, within))
                continue
            code, message = NONE, None
            try:
                if not within:
                    raise too_many()
                await self.api.delete_topic(ctx, str(name), kind="topic")
            except (Refused, *ANY_ERROR) as exc:
                code, message = error_code(exc), message_of(exc)
            responses.append({"name": str(name), "topic_id": ZERO_UUID, "error_code": code, "error_message": message})
        return {"throttle_time": 0, "responses": responses}

    async def _delete_by_id(self, ctx: CallContext, topic_id: uuid.UUID | None, within: bool) -> dict[str, Any]:
        """DeleteTopics v6 naming a topic by id: the live topic with it, deleted as by its name;
        an id no live topic has, or one whose topic the caller may not delete (or see), is
        UNKNOWN_TOPIC_ID with no name (``kafka_api.topic_ids``)."""
        meta = topic_ids.resolve(self.node.coordinator, topic_id)
        unknown = {"name": None, "topic_id": topic_id or ZERO_UUID, "error_code": UNKNOWN_TOPIC_ID,
                   "error_message": "no topic has this id (or not one you may see)"}
        try:
            if not within:
                raise too_many()
            if meta is None:
                return unknown
            await self.api.delete_topic(ctx, meta.name, kind="topic", topic_id=meta.topic_id)
        except (Refused, *ANY_ERROR) as exc:
            code = error_code(exc)
            if meta is not None and not isinstance(exc, Refused):
                code = await topic_ids.by_id_code(self.api, ctx, meta.name, code)
            if code in (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION):
                return unknown
            return {"name": None, "topic_id": topic_id or ZERO_UUID, "error_code": code,
                    "error_message": message_of(exc)}
        return {"name": meta.name, "topic_id": topic_id, "error_code": NONE, "error_message": None}

    async def create_partitions(self, session: Session, request: Any) -> dict[str, Any]:
        ctx = session.context()
        results = []
        for topic, within in bounded(request.topics):
            name, count = str(topic.name), int(topic.count)
            code, message = NONE, None
            try:
                if not within:
                    raise too_many()
                if topic.assignments:
                    raise Refused(INVALID_REPLICA_ASSIGNMENT, "LogBroker places replicas itself: give the count alone")
                if request.validate_only:
                    await self.api.check_add_partitions(ctx, name, count, kind="topic")
                else:
                    await self.api.add_partitions(ctx, name, {"partitions": count}, kind="topic")
            except InvalidTopicError as exc:  # past authorization: the count is not a larger one
                code, message = INVALID_PARTITIONS, message_of(exc)
            except (Refused, *ANY_ERROR) as exc:
                code, message = error_code(exc), message_of(exc)
            results.append({"name": name, "error_code": code, "error_message": message})
        return {"throttle_time": 0, "results": results}

    # ---- configs ---------------------------------------------------------------------------------

    async def describe_configs(self, session: Session, request: Any) -> dict[str, Any]:
        ctx = session.context()
        results = []
        for resource, within in bounded(request.resources):
            kind, name = int(resource.resource_type), str(resource.resource_name)
            keys = resource.configuration_keys
            wanted = {str(k) for k in keys} if keys else None  # null or empty: every key
            try:
                if not within:
                    raise too_many()
                configs = await self._resource_configs(ctx, kind, name, wanted)
            except (Refused, *ANY_ERROR) as exc:
                results.append(_resource_result(kind, name, exc, configs=[]))
                continue
            results.append(_resource_result(kind, name, None, configs=configs))
        return {"throttle_time": 0, "results": results}

    async def _resource_configs(self, ctx: CallContext, kind: int, name: str,
                                wanted: Collection[str] | None) -> list[dict[str, Any]]:
        if kind == BROKER_RESOURCE:
            if name not in ("", str(self.node.config.node_id)):
                raise Refused(INVALID_REQUEST, f"this is broker {self.node.config.node_id}, not {name[:40]!r}")
            return []  # a node's settings are fixed when it starts: none are dynamic
        if kind != TOPIC_RESOURCE:
            raise Refused(INVALID_REQUEST, f"resource type {kind}: LogBroker describes topics (2), brokers (4)")
        described = await self.api.describe_topic(ctx, name, kind="topic", offsets=False)
        stored = (await self.node.coordinator.get_topic(name)).config
        return config_entries(described["config"], stored, wanted)

    async def alter_configs(self, session: Session, request: Any) -> dict[str, Any]:
        """A topic's whole config replaced: what the request does not name goes back to the default."""
        ctx = session.context()

        async def replace(resource: Any) -> None:
            given = dict(config_value(str(config.name), config.value) for config in resource.configs)
            if len(given) < len(resource.configs):
                raise Refused(INVALID_REQUEST, "a config is named twice")
            changes = {**dict.fromkeys(RESETTABLE), **given}
            await self._alter(ctx, str(resource.resource_name), changes, bool(request.validate_only))
        return {"throttle_time": 0, "responses": await _each_topic(request.resources, replace)}

    async def incremental_alter_configs(self, session: Session, request: Any) -> dict[str, Any]:
        ctx = session.context()

        async def change(resource: Any) -> None:
            name = str(resource.resource_name)
            effective = None
            if needs_effective(resource.configs):
                described = await self.api.describe_topic(ctx, name, kind="topic", offsets=False)
                effective = described["config"]
            await self._alter(ctx, name, incremental_changes(resource.configs, effective), bool(request.validate_only))
        return {"throttle_time": 0, "responses": await _each_topic(request.resources, change)}

    async def _alter(self, ctx: CallContext, name: str, changes: dict[str, Any], validate_only: bool) -> None:
        """Change (or, ``validate_only``, check) a topic's config; an empty change only authorizes."""
        try:
            if not changes:
                await self.api.authorize(ctx, name, "manage")
            elif validate_only:
                await self.api.check_alter_topic_config(ctx, name, changes, kind="topic")
            else:
                await self.api.alter_topic_config(ctx, name, changes, kind="topic")
        except InvalidTopicError as exc:  # past authorization: a key or value the topic cannot take
            raise Refused(INVALID_CONFIG, message_of(exc)) from None

    # ---- cluster ---------------------------------------------------------------------------------

    async def describe_cluster(self, session: Session, request: Any) -> dict[str, Any]:
        node = self.node
        endpoint = int(getattr(request, "endpoint_type", BROKERS_ENDPOINT))
        answer: dict[str, Any] = {"throttle_time": 0, "error_code": NONE, "error_message": None,
                                  "endpoint_type": endpoint, "cluster_id": node.config.cluster_name,
                                  "controller_id": node.config.node_id, "brokers": [],
                                  "cluster_authorized_operations": NO_OPERATIONS}
        if endpoint != BROKERS_ENDPOINT:
            return {**answer, "error_code": UNSUPPORTED_ENDPOINT_TYPE, "controller_id": -1,
                    "error_message": "LogBroker nodes are brokers: there are no separate controllers to describe"}
        brokers = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                    "is_fenced": False} for b in await live_brokers(node)]
        return {**answer, "brokers": brokers}


def _created(name: str, partitions: int, replication: int, configs: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": NONE, "error_message": None,
            "num_partitions": partitions, "replication_factor": replication, "configs": configs}


def _creation_error(name: str, exc: BaseException) -> dict[str, Any]:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": error_code(exc), "error_message": message_of(exc),
            "num_partitions": DEFAULT, "replication_factor": DEFAULT, "configs": None}


def _resource_result(kind: int, name: str, exc: BaseException | None, **extra: Any) -> dict[str, Any]:
    return {"error_code": NONE if exc is None else error_code(exc),
            "error_message": None if exc is None else message_of(exc),
            "resource_type": kind, "resource_name": name, **extra}
