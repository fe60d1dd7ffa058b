"""Kafka's admin APIs on a real node (auth on) through real clients: librdkafka's ``AdminClient``
(``confluent-kafka``) and kafka-python's ``KafkaAdminClient``, every result checked over the HTTP
API (``GET /v1/topics/{name}``: partitions, owner, config). Plus the table and the config names,
pure.

Users: ``ann`` creates and owns topics, ``bob`` has no grant on them, ``carl`` and ``dora`` meet
their holding limits (``LIMITS``)."""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from coordinator.models import TopicMetadata
from coordinator.topic_config import KNOWN_KEYS
from kafka_api import entities
from kafka_api.admin import (
    BY_KAFKA_NAME,
    BY_KEY,
    CONFIG_NAMES,
    AdminHandlers,
    Refused,
    config_value,
    incremental_changes,
    kafka_value,
)
from kafka_api.apis import APIS
from logbroker.topic_config_view import described_config
from segments.config import LogConfig
from tests.http_api.conftest import Http
from tests.kafka_api.test_listener import TIMEOUT_S, sasl
from tests.kafka_api.test_topic_ids import call
from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer
from tests.support.nodes import NodeProcess

PASSWORD = "a-kafka-admin-test-password"
LIMITS = {"topics_max": 4, "partitions_max": 10}
ADMIN_KEYS = {19, 20, 32, 33, 37, 44, 60}


@pytest.fixture(scope="module")
def users(http, admin_token) -> list[str]:
    names = ["ann", "bob", "carl", "dora"]
    for name in names:
        quotas = LIMITS if name in ("carl", "dora") else {}
        http.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD, "quotas": quotas},
                  headers=bearer(admin_token))
    return names


def client(node: NodeProcess, username: str = ADMIN) -> AdminClient:
    return AdminClient(sasl(node, username, ADMIN_PASSWORD if username == ADMIN else PASSWORD))


@pytest.fixture(scope="module")
def as_admin(node) -> AdminClient:
    return client(node)


@pytest.fixture(scope="module")
def as_ann(node, users) -> AdminClient:
    return client(node, "ann")


@pytest.fixture(scope="module")
def as_bob(node, users) -> AdminClient:
    return client(node, "bob")


def done(future: Future[Any]) -> Any:
    return future.result(timeout=TIMEOUT_S)


def failure(future: Future[Any]) -> int:
    """The Kafka error code ``future`` failed with."""
    with pytest.raises(KafkaException) as failed:
        future.result(timeout=TIMEOUT_S)
    return int(failed.value.args[0].code())


def create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict[str, Future[Any]]:
    return admin.create_topics(list(topics), validate_only=validate_only, request_timeout=TIMEOUT_S)


def topic_over_http(http: Http, token: str, name: str) -> dict[str, Any]:
    return http.json("GET", f"/v1/topics/{name}?offsets=false", headers=bearer(token))


def absent(http: Http, token: str, name: str) -> bool:
    listed = http.json("GET", "/v1/topics?internal=true", headers=bearer(token))["topics"]
    return name not in {topic["name"] for topic in listed}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---- CreateTopics ------------------------------------------------------------------------------

def test_a_topic_created_over_kafka_is_the_callers_with_its_partitions_and_config(http, admin_token, as_ann):
    name = unique("ann-made")
    config = {"retention.ms": "3600000", "cleanup.policy": "compact, delete", "min.insync.replicas": "1",
              "max.message.bytes": "2097152", "dedup_window_ms": "5000"}
    done(create(as_ann, NewTopic(name, num_partitions=3, replication_factor=1, config=config))[name])
    topic = topic_over_http(http, admin_token, name)
    assert (topic["owner"], topic["partition_count"], topic["replication_factor"]) == ("ann", 3, 1)
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert {k: topic["config"][k] for k in ("retention_ms", "cleanup_policy", "min_insync_replicas",
                                             "max_batch_bytes", "dedup_window_ms")} == \
        {"retention_ms": 3_600_000, "cleanup_policy": "compact,delete", "min_insync_replicas": 1,
         "max_batch_bytes": 2_097_152, "dedup_window_ms": 5000}
    listed = as_ann.list_topics(topic=name, timeout=TIMEOUT_S).topics[name]
    assert listed.error is None and sorted(listed.partitions) == [0, 1, 2]


def test_the_defaults_are_the_brokers_and_an_admins_topic_is_the_admins(http, admin_token, as_admin):
    name = unique("defaults")
    done(create(as_admin, NewTopic(name))[name])  # num_partitions and replication_factor -1
    topic = topic_over_http(http, admin_token, name)
    assert (topic["owner"], topic["partition_count"], topic["replication_factor"]) == (ADMIN, 1, 1)
    assert topic["config"]["retention_ms"] == LogConfig().retention_ms


@pytest.mark.parametrize(("name", "asked", "code"), [
    (None, {"num_partitions": 0}, KafkaError.INVALID_PARTITIONS),
    (None, {"num_partitions": 2000}, KafkaError.INVALID_PARTITIONS),
    (None, {"replication_factor": 3}, KafkaError.INVALID_REPLICATION_FACTOR),
    (None, {"replication_factor": 0}, KafkaError.INVALID_REPLICATION_FACTOR),
    (None, {"num_partitions": 1, "replica_assignment": [[1]]}, KafkaError.INVALID_REPLICA_ASSIGNMENT),
    (None, {"config": {"compression.type": "gzip"}}, KafkaError.INVALID_CONFIG),
    (None, {"config": {"retention.ms": "soon"}}, KafkaError.INVALID_CONFIG),
    (None, {"config": {"segment.bytes": "10"}}, KafkaError.INVALID_CONFIG),
    (None, {"config": {"cleanup.policy": "forever"}}, KafkaError.INVALID_CONFIG),
    (None, {"replication_factor": 1, "config": {"min.insync.replicas": "2"}}, KafkaError.INVALID_CONFIG),
    (None, {"config": {"encryption": "on"}}, KafkaError.INVALID_CONFIG),  # the node has no key ring
    ("bad name!", {}, KafkaError.TOPIC_EXCEPTION),
    ("__reserved", {}, KafkaError.TOPIC_EXCEPTION),
])
def test_a_topic_the_node_would_refuse_gets_its_kafka_error_and_nothing_is_created(http, admin_token, as_ann, name,
                                                                                      asked, code):
    name = name or unique("refused")
    assert failure(create(as_ann, NewTopic(name, **asked))[name]) == code
    assert absent(http, admin_token, name)


def test_an_existing_name_is_topic_already_exists_and_stays_as_it_was(http, admin_token, as_ann, as_bob):
    name = unique("taken")
    done(create(as_ann, NewTopic(name, num_partitions=2))[name])
    assert failure(create(as_bob, NewTopic(name, num_partitions=5))[name]) == KafkaError.TOPIC_ALREADY_EXISTS
    topic = topic_over_http(http, admin_token, name)
    assert (topic["owner"], topic["partition_count"]) == ("ann", 2)


def test_validate_only_checks_everything_and_creates_nothing(http, admin_token, as_ann):
    good, bad = unique("checked"), unique("checked-bad")
    futures = create(as_ann, NewTopic(good, num_partitions=2, config={"retention.ms": "60000"}),
                     NewTopic(bad, config={"retention.ms": "-7"}), validate_only=True)
    assert done(futures[good]) is None
    assert failure(futures[bad]) == KafkaError.INVALID_CONFIG
    assert absent(http, admin_token, good) and absent(http, admin_token, bad)


def test_a_users_holding_limits_apply_topic_by_topic(http, admin_token, node, users):
    dora = client(node, "dora")
    names = [unique(f"dora-{i}") for i in range(5)]
    futures = create(dora, *[NewTopic(name) for name in names])
    for name in names[:4]:
        assert done(futures[name]) is None
    assert failure(futures[names[4]]) == KafkaError.THROTTLING_QUOTA_EXCEEDED  # topics_max 4
    assert absent(http, admin_token, names[4])
    carl = client(node, "carl")
    first, second = unique("carl-1"), unique("carl-2")
    done(create(carl, NewTopic(first, num_partitions=8))[first])
    for validate_only in (True, False):  # partitions_max 10
        assert failure(create(carl, NewTopic(second, num_partitions=3), validate_only=validate_only)[second]) \
            == KafkaError.THROTTLING_QUOTA_EXCEEDED
    assert absent(http, admin_token, second)
    assert failure(carl.create_partitions([NewPartitions(first, 11)], request_timeout=TIMEOUT_S)[first]) \
        == KafkaError.THROTTLING_QUOTA_EXCEEDED
    assert topic_over_http(http, admin_token, first)["partition_count"] == 8


# ---- DeleteTopics ------------------------------------------------------------------------------

def test_an_owner_deletes_their_topic_and_another_user_may_not(http, admin_token, as_ann, as_bob, as_admin):
    anns, admins = unique("ann-doomed"), unique("admin-kept")
    done(create(as_ann, NewTopic(anns))[anns])
    done(create(as_admin, NewTopic(admins))[admins])
    refused = as_bob.delete_topics([anns, admins], request_timeout=TIMEOUT_S)
    assert failure(refused[anns]) == failure(refused[admins]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert failure(as_ann.delete_topics([admins], request_timeout=TIMEOUT_S)[admins]) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic_over_http(http, admin_token, anns)["owner"] == "ann"
    assert topic_over_http(http, admin_token, admins)["owner"] == ADMIN
    assert done(as_ann.delete_topics([anns], request_timeout=TIMEOUT_S)[anns]) is None
    assert absent(http, admin_token, anns)


def test_an_unknown_name_is_refused_to_users_and_unknown_to_admins(as_bob, as_admin):
    name = unique("never-made")
    assert failure(as_bob.delete_topics([name], request_timeout=TIMEOUT_S)[name]) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED  # a user cannot probe names
    assert failure(as_admin.delete_topics([name], request_timeout=TIMEOUT_S)[name]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_queue_is_no_kafka_topic_and_survives_a_kafka_delete(http, admin_token, as_admin):
    name = unique("a-queue")
    http.json("POST", "/v1/topics", 201, body={"name": name, "kind": "queue"}, headers=bearer(admin_token))
    assert failure(as_admin.delete_topics([name], request_timeout=TIMEOUT_S)[name]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic_over_http(http, admin_token, name)["kind"] == "queue"


# ---- CreatePartitions --------------------------------------------------------------------------

def test_the_owner_grows_a_topic_others_may_not_and_it_only_grows(http, admin_token, as_ann, as_bob):
    name = unique("ann-grown")
    done(create(as_ann, NewTopic(name, num_partitions=1))[name])

    def grow(admin: AdminClient, count: int, validate_only: bool = False) -> Future[Any]:
        return admin.create_partitions([NewPartitions(name, count)], validate_only=validate_only,
                                       request_timeout=TIMEOUT_S)[name]
    assert done(grow(as_ann, 3, validate_only=True)) is None
    assert topic_over_http(http, admin_token, name)["partition_count"] == 1
    assert failure(grow(as_bob, 3)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert done(grow(as_ann, 3)) is None
    topic = topic_over_http(http, admin_token, name)
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert failure(grow(as_ann, 3)) == failure(grow(as_ann, 2)) == KafkaError.INVALID_PARTITIONS
    assert topic_over_http(http, admin_token, name)["partition_count"] == 3


# ---- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs ------------------------------------

def describe(admin: AdminClient, name: str, kind: ResourceType = ResourceType.TOPIC) -> Future[Any]:
    (future,) = admin.describe_configs([ConfigResource(kind, name)], request_timeout=TIMEOUT_S).values()
    return future


def test_describe_configs_gives_the_config_in_force_in_kafkas_names(http, admin_token, as_ann, as_bob):
    name = unique("ann-described")
    done(create(as_ann, NewTopic(name, config={"retention.ms": "7200000", "leader_racks": "r1,r2"}))[name])
    entries = done(describe(as_ann, name))
    in_force = topic_over_http(http, admin_token, name)["config"]
    assert {entry.name for entry in entries.values()} == {BY_KEY[key].kafka for key in in_force}
    for key, value in in_force.items():
        entry = entries[BY_KEY[key].kafka]
        assert entry.value == kafka_value(value), key
        set_here = key in ("retention_ms", "leader_racks")
        assert entry.source == (ConfigSource.DYNAMIC_TOPIC_CONFIG if set_here else ConfigSource.DEFAULT_CONFIG).value
        assert entry.is_read_only == (key in ("segment_index_bytes", "key_hash")), key  # fixed at creation
    assert (entries["retention.ms"].value, entries["leader_racks"].value) == ("7200000", "r1,r2")
    assert failure(describe(as_bob, name)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_describe_configs_of_the_broker_is_empty_and_of_a_group_refused(node, as_admin):
    assert done(describe(as_admin, "1", ResourceType.BROKER)) == {}
    assert failure(describe(as_admin, "some-group", ResourceType.GROUP)) == KafkaError.INVALID_REQUEST


def incremental(admin: AdminClient, name: str, *changes: tuple[str, str | None, AlterConfigOpType],
                validate_only: bool = False) -> Future[Any]:
    entries = [ConfigEntry(key, value, incremental_operation=operation) for key, value, operation in changes]
    (future,) = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)],
                                                validate_only=validate_only, request_timeout=TIMEOUT_S).values()
    return future


def test_incremental_alter_configs_sets_appends_and_deletes_for_the_owner_alone(http, admin_token, as_ann, as_bob):
    name = unique("ann-altered")
    done(create(as_ann, NewTopic(name, config={"segment.ms": "3600000"}))[name])
    op = AlterConfigOpType
    done(incremental(as_ann, name, ("retention.ms", "60000", op.SET), ("cleanup.policy", "compact", op.APPEND),
                     ("segment.ms", None, op.DELETE)))
    config = topic_over_http(http, admin_token, name)["config"]
    assert (config["retention_ms"], config["cleanup_policy"], config["segment_ms"]) == \
        (60_000, "compact,delete", LogConfig().segment_ms)
    done(incremental(as_ann, name, ("cleanup.policy", "compact", op.SUBTRACT)))
    assert topic_over_http(http, admin_token, name)["config"]["cleanup_policy"] == "delete"
    done(incremental(as_ann, name, ("retention.ms", "120000", op.SET), validate_only=True))
    assert failure(incremental(as_bob, name, ("retention.ms", "120000", op.SET))) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert failure(incremental(as_ann, name, ("compression.type", "gzip", op.SET))) == KafkaError.INVALID_CONFIG
    assert failure(incremental(as_ann, name, ("segment.index.bytes", "1048576", op.SET))) \
        == KafkaError.INVALID_CONFIG  # fixed on a live topic
    assert failure(incremental(as_ann, name, ("retention.ms", "60000", op.APPEND))) == KafkaError.INVALID_CONFIG
    assert topic_over_http(http, admin_token, name)["config"]["retention_ms"] == 60_000


def test_alter_configs_replaces_the_whole_config(http, admin_token, as_ann):
    name = unique("ann-replaced")
    done(create(as_ann, NewTopic(name, config={"segment.ms": "3600000", "retention.ms": "60000"}))[name])
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.bytes": "1048576"})
    with pytest.deprecated_call():  # librdkafka's own word: AlterConfigs is still what older tools send
        (future,) = as_ann.alter_configs([resource], request_timeout=TIMEOUT_S).values()
    done(future)
    config = topic_over_http(http, admin_token, name)["config"]
    assert (config["retention_bytes"], config["retention_ms"], config["segment_ms"]) == \
        (1_048_576, LogConfig().retention_ms, LogConfig().segment_ms)


# ---- DescribeCluster ---------------------------------------------------------------------------

def test_describe_cluster_names_the_node_as_broker_and_controller(node, http, admin_token, as_ann):
    cluster = done(as_ann.describe_cluster(request_timeout=TIMEOUT_S))
    host, _, port = node.kafka_address.rpartition(":")
    assert cluster.cluster_id == "logbroker"
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, host, int(port))]
    assert cluster.controller.id == 1
    nodes = http.json("GET", "/v1/cluster", headers=bearer(admin_token))["nodes"]
    assert [n["kafka_address"] for n in nodes] == [node.kafka_address]


def test_describe_cluster_asked_for_controllers_answers_unsupported_endpoint_type(node, users):
    """KIP-919's controller endpoint: LogBroker nodes are brokers only, and the answer says so with
    Kafka's own number for it (115)."""
    answer = call(node, ADMIN, 60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
    assert answer.error_code == ErrorCode.unsupported_endpoint_type and answer.controller_id == -1
    assert call(node, ADMIN, 60, 1, {"include_cluster_authorized_operations": False,
                                      "endpoint_type": 1}).error_code == ErrorCode.none


# ---- kafka-python ------------------------------------------------------------------------------

def test_kafka_pythons_admin_client_creates_describes_and_deletes(node, http, admin_token, users):
    admin = KafkaAdminClient(bootstrap_servers=node.kafka_address, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="ann", sasl_plain_password=PASSWORD,
                             request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        name = unique("by-kafka-python")
        admin.create_topics({name: {"num_partitions": 2, "configs": {"retention.ms": "90000"}}})
        topic = topic_over_http(http, admin_token, name)
        assert (topic["owner"], topic["partition_count"], topic["config"]["retention_ms"]) == ("ann", 2, 90_000)
        cluster = admin.describe_cluster()
        assert (cluster["cluster_id"], cluster["controller_id"]) == ("logbroker", 1)
        by_id = admin.delete_topics([uuid.uuid4()], raise_errors=False)["topics"]
        assert [t["error_code"] for t in by_id] == [KafkaError.UNKNOWN_TOPIC_ID]
        admin.delete_topics([name])
        assert absent(http, admin_token, name)
    finally:
        admin.close()


# ---- pure: the table and the config names ------------------------------------------------------

def test_every_admin_row_names_a_handler_and_versions_kio_has():
    rows = [api for api in APIS if api.key in ADMIN_KEYS]
    assert {api.key for api in rows} == ADMIN_KEYS
    for api in rows:
        part, method = api.name.split(".")
        assert part == "admin" and callable(getattr(AdminHandlers, method))
        for version in range(api.min_version, api.max_version + 1):
            assert entities.request_class(api.key, version) and entities.response_class(api.key, version)


def test_every_key_a_topic_shows_has_a_kafka_name_and_every_name_a_changeable_key():
    meta = TopicMetadata("t", "id", 1, 1, "topic", {}, None, 0)
    assert set(described_config(meta, LogConfig())) == set(BY_KEY)
    assert set(BY_KEY) <= KNOWN_KEYS
    assert len(BY_KAFKA_NAME) == len(BY_KEY) == len(CONFIG_NAMES)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([n for n in CONFIG_NAMES if n.kind == "int"]), st.integers(-(2**62), 2**62))
def test_a_whole_number_reads_back_as_kafka_wrote_it(name, value):
    assert config_value(name.kafka, f" {value} ") == (name.key, value)
    assert kafka_value(value) == str(value)


@pytest.mark.parametrize("value", ["1.5", "", "0x10", "1e3", "١٢"])
def test_a_whole_number_config_refuses_anything_else(value):
    with pytest.raises(Refused) as refused:
        config_value("retention.ms", value)
    assert refused.value.code == KafkaError.INVALID_CONFIG


class Op:
    def __init__(self, name: str, value: str | None, operation: int) -> None:
        self.name, self.value, self.config_operation = name, value, operation


def test_appending_and_subtracting_work_on_the_list_in_force():
    effective = {"cleanup_policy": "delete", "leader_racks": ["r1"]}
    changes = incremental_changes([Op("cleanup.policy", "compact,delete", 2), Op("leader_racks", "r1", 3)], effective)
    assert changes == {"cleanup_policy": "delete,compact", "leader_racks": []}
    with pytest.raises(Refused) as twice:
        incremental_changes([Op("retention.ms", "1", 0), Op("retention.ms", None, 1)], effective)
    assert twice.value.code == KafkaError.INVALID_REQUEST
