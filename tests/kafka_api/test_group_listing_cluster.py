"""ListGroups and DescribeGroups on a two-node cluster (real etcd, real processes): only the node
that coordinates groups lists and describes them; the other lists none (clients ask every broker
and merge) and answers DescribeGroups NOT_COORDINATOR, so that a client asks FindCoordinator's
node. ``AdminClient`` bootstrapped on either node finds the group once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState
from confluent_kafka.admin import AdminClient

from tests.kafka_api.test_listener import TIMEOUT_S, authenticated, encode_body, send_request
from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import Cluster, running_cluster, wait_until

NOT_COORDINATOR = 16
FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS = 10, 15, 16


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("kafka-groups-cluster")), size=2,
                         extra=("--kafka-port", "0")) as running:
        yield running


def kafka(cluster: Cluster, *nodes: int, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": ",".join(cluster.nodes[n].kafka_address for n in nodes),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": ADMIN,
            "sasl.password": ADMIN_PASSWORD, **extra}


def test_only_the_coordinator_lists_and_describes_a_group(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    topic, group = "clustered-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token, body={"name": topic, "partitions": 2})
    consumer = Consumer(kafka(cluster, 1, 2, **{"group.id": group, "session.timeout.ms": 6000,
                                                "heartbeat.interval.ms": 500}))
    try:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 2, timeout_s=TIMEOUT_S)
        with authenticated(cluster.nodes[1]) as sock:
            found = send_request(sock, FIND_COORDINATOR, 4, encode_body(
                FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}))
        coordinator = found.coordinators[0].node_id
        other = 2 if coordinator == 1 else 1
        with authenticated(cluster.nodes[other]) as sock:
            described = send_request(sock, DESCRIBE_GROUPS, 5, encode_body(
                DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}))
            listing = send_request(sock, LIST_GROUPS, 5, encode_body(LIST_GROUPS, 5, {}))
        assert [(g.group_id, g.error_code.value) for g in described.groups] == [(group, NOT_COORDINATOR)]
        assert (listing.error_code.value, listing.groups) == (0, ())
        for bootstrap in (1, 2):
            admin = AdminClient(kafka(cluster, bootstrap))
            result = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
            assert result.errors == [] and [g.group_id for g in result.valid].count(group) == 1
            description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
            assert description.state == ConsumerGroupState.STABLE and len(description.members) == 1
            assert description.coordinator.id == coordinator
    finally:
        consumer.close()
