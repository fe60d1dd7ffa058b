"""Kafka consumer groups on a real node through librdkafka (``confluent-kafka``): members split a
topic's partitions, commits are the broker's committed offsets (also over HTTP), a consumer
resumes where its group committed, a group belongs to the user who first used it, and
``AdminClient`` lists and describes the groups a user may see (ListGroups, DescribeGroups)."""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient

from kafka_api.apis import BY_KEY
from kafka_api.groups import GROUPS_PER_REQUEST_MAX
from tests.kafka_api.test_listener import (
    TIMEOUT_S,
    USER,
    USER_PASSWORD,
    authenticated,
    closed,
    create_topic,
    encode_body,
    produce,
    sasl,
    send_request,
)
from tests.support.auth import bearer, login
from tests.support.nodes import NodeProcess

LISTER, LISTER_PASSWORD = "kafka-lister", "kafka-lister-password"
LIST_GROUPS, DESCRIBE_GROUPS = 16, 15


def member(node: NodeProcess, group: str, **config: Any) -> Consumer:
    return Consumer(sasl(node, **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **config}))


def poll_until(consumers: list[Consumer], done: Any, timeout_s: float = TIMEOUT_S) -> dict[int, list[Any]]:
    got: dict[int, list[Any]] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout_s
    while not done(got) and time.monotonic() < deadline:
        for i, consumer in enumerate(consumers):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got[i].append(message)
    return got


def test_two_members_split_the_partitions_and_read_everything_once(node, http, admin_token):
    topic, group = "split-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic, partitions=4)
    consumers = [member(node, group, **{"auto.offset.reset": "latest"}) for _ in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        poll_until(consumers, lambda _: all(len(c.assignment()) == 2 for c in consumers))
        for partition in range(4):
            produce(node, topic, [(None, b"p%d-%d" % (partition, i), []) for i in range(5)], partition=partition)
        got = poll_until(consumers, lambda g: sum(len(v) for v in g.values()) >= 20)
        got = {**got, **{i: v + poll_until([consumers[i]], lambda _: False, timeout_s=1)[0] for i, v in got.items()}}
        values = sorted(m.value() for v in got.values() for m in v)
        assert values == sorted(b"p%d-%d" % (p, i) for p in range(4) for i in range(5))
        assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
        assert assignments[0] | assignments[1] == {0, 1, 2, 3} and not assignments[0] & assignments[1]
        assert all(assignments)
    finally:
        for consumer in consumers:
            consumer.close()


def test_a_group_resumes_from_its_commit_and_http_shows_it(node, http, admin_token):
    topic, group = "resume-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic)
    produce(node, topic, [(None, b"r%d" % i, []) for i in range(10)])
    first = member(node, group)
    try:
        first.subscribe([topic])
        got = poll_until([first], lambda g: len(g[0]) >= 4)[0][:4]
        assert [m.value() for m in got] == [b"r0", b"r1", b"r2", b"r3"]
        first.commit(message=got[-1], asynchronous=False)
        committed = first.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == 4
    finally:
        first.close()
    described = http.json("GET", f"/v1/groups/{group}", headers=bearer(admin_token))
    assert [(o["topic"], o["partition"], o["committed_offset"], o["lag"]) for o in described["offsets"]] == \
        [(topic, 0, 4, 6)]
    second = member(node, group)
    try:
        second.subscribe([topic])
        got = poll_until([second], lambda g: len(g[0]) >= 6)[0]
        assert [m.value() for m in got][:6] == [b"r%d" % i for i in range(4, 10)]
    finally:
        second.close()


def test_another_users_group_is_refused(node, http, admin_token):
    topic, group = "guarded-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic)
    http.json("POST", "/v1/users", 201, body={"username": USER, "password": USER_PASSWORD},
              headers=bearer(admin_token))
    http.json("PUT", f"/v1/topics/{topic}/acl", body={"user": USER, "permissions": ["read"]},
              headers=bearer(admin_token))
    owner = member(node, group)
    try:
        owner.subscribe([topic])
        poll_until([owner], lambda g: bool(owner.assignment()), timeout_s=10)
        assert owner.assignment()
        intruder = member(node, group, **{"sasl.username": USER, "sasl.password": USER_PASSWORD})
        errors: list[Any] = []
        try:
            intruder.subscribe([topic])
            deadline = time.monotonic() + 10
            while not errors and time.monotonic() < deadline:
                try:
                    message = intruder.poll(0.2)
                except KafkaException as exc:
                    errors.append(exc.args[0])
                else:
                    if message is not None and message.error() is not None:
                        errors.append(message.error())
            assert [e.code() for e in errors][:1] == [KafkaError.GROUP_AUTHORIZATION_FAILED], errors
            assert not intruder.assignment()
        finally:
            intruder.close()
    finally:
        owner.close()


def test_a_users_members_are_counted_across_groups_and_protocols(node, http, admin_token):
    name, password = "kafka-member-limited", "member-limited-password"
    http.json("POST", "/v1/users", 201, body={"username": name, "password": password}, headers=bearer(admin_token))
    http.json("PUT", f"/v1/users/{name}/quotas", body={"group_members_max": 2}, headers=bearer(admin_token))
    topic = "limited-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic)
    http.json("PUT", f"/v1/topics/{topic}/acl", body={"user": name, "permissions": ["read"]},
              headers=bearer(admin_token))
    token = login(http, name, password)
    http.json("POST", "/v1/groups/limited-http/members", body={"topics": [topic]}, headers=bearer(token))
    creds = {"sasl.username": name, "sasl.password": password}
    first = member(node, "limited-kafka-1", **creds)
    second = member(node, "limited-kafka-2", **creds)
    try:
        first.subscribe([topic])
        poll_until([first], lambda _: bool(first.assignment()), timeout_s=10)
        assert first.assignment(), "an HTTP member and a Kafka member: within the limit of 2"
        second.subscribe([topic])
        errors: list[Any] = []
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            message = second.poll(0.2)
            if message is not None and message.error() is not None:
                errors.append(message.error())
        assert not second.assignment() and errors, "a third member is refused"
        assert errors[0].code() == KafkaError.THROTTLING_QUOTA_EXCEEDED, errors[0]
    finally:
        first.close()
        second.close()


# ---- ListGroups and DescribeGroups ----------------------------------------------------------------

@pytest.fixture(scope="module")
def lister(http, admin_token) -> str:
    """A user with no grant on anyone's group."""
    http.json("POST", "/v1/users", 201, body={"username": LISTER, "password": LISTER_PASSWORD},
              headers=bearer(admin_token))
    return LISTER


def listed_groups(admin: AdminClient, **options: Any) -> dict[str, Any]:
    result = admin.list_consumer_groups(request_timeout=TIMEOUT_S, **options).result(TIMEOUT_S)
    assert result.errors == []
    return {g.group_id: g for g in result.valid}


def described_group(admin: AdminClient, group: str, **options: Any) -> Any:
    futures = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S, **options)
    return futures[group].result(TIMEOUT_S)


def refusal(admin: AdminClient, group: str) -> int:
    with pytest.raises(KafkaException) as refused:
        described_group(admin, group)
    return int(refused.value.args[0].code())


def test_admin_client_lists_and_describes_a_group_of_two_members(node, http, admin_token, lister):
    topic, group = "listed-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic, partitions=4)
    consumers = [member(node, group, **{"client.id": f"reader-{i}"}) for i in range(2)]
    admin = AdminClient(sasl(node))
    other = AdminClient(sasl(node, LISTER, LISTER_PASSWORD))
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        poll_until(consumers, lambda _: all(len(c.assignment()) == 2 for c in consumers))
        assignments = {frozenset((tp.topic, tp.partition) for tp in c.assignment()) for c in consumers}
        assert len(assignments) == 2

        found = listed_groups(admin)[group]
        assert (found.state, found.type, found.is_simple_consumer_group) == \
            (ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC, False)
        assert group in listed_groups(admin, states={ConsumerGroupState.STABLE}, types={ConsumerGroupType.CLASSIC})
        assert group not in listed_groups(admin, states={ConsumerGroupState.EMPTY})
        assert group not in listed_groups(admin, types={ConsumerGroupType.CONSUMER})

        described = described_group(admin, group, include_authorized_operations=True)
        assert (described.state, described.partition_assignor, described.is_simple_consumer_group) == \
            (ConsumerGroupState.STABLE, "range", False)
        assert {frozenset((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
                for m in described.members} == assignments
        assert all(m.host == "/127.0.0.1" and m.group_instance_id is None and m.member_id for m in described.members)
        assert sorted(m.client_id for m in described.members) == ["reader-0", "reader-1"]

        # The same group over HTTP (and so in the console): its Kafka members, their partitions.
        consumers[0].commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # the group exists for HTTP
        over_http = http.json("GET", f"/v1/groups/{group}", headers=bearer(admin_token))
        assert (over_http["state"], over_http["strategy"]) == ("stable", "range")
        assert sorted(m["client_id"] for m in over_http["members"]) == ["reader-0", "reader-1"]
        assert {m["protocol"] for m in over_http["members"]} == {"kafka"}
        assert {frozenset((t, p) for t, ps in m["assignment"].items() for p in ps)
                for m in over_http["members"]} == assignments
        owners = {m["member_id"] for m in over_http["members"]}
        assert {o["member_id"] for o in over_http["offsets"] if o["partition"] == 0} <= owners
        page = http.json("GET", "/v1/groups", headers=bearer(admin_token))["groups"]
        assert [(g["state"], g["members"]) for g in page if g["group"] == group] == [("stable", 2)]
        assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}

        assert group not in listed_groups(other), "another user's group is not listed"
        assert refusal(other, group) == KafkaError.GROUP_AUTHORIZATION_FAILED
        http.json("PUT", f"/v1/groups/{group}/acl", body={"user": LISTER, "permissions": ["read"]},
                  headers=bearer(admin_token))
        assert listed_groups(other)[group].state == ConsumerGroupState.STABLE
        seen = described_group(other, group, include_authorized_operations=True)
        assert seen.state == ConsumerGroupState.STABLE and seen.members == [], "a grantee sees only its own members"
        assert set(seen.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    finally:
        for consumer in consumers:
            consumer.close()


def test_a_group_of_offsets_is_empty_of_http_members_stable_and_an_unknown_one_dead(node, http, admin_token, lister):
    topic, group = "offsets-only-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic)
    produce(node, topic, [(None, b"o%d" % i, []) for i in range(5)])
    committer = Consumer(sasl(node, **{"group.id": group, "enable.auto.commit": False}))
    try:  # no subscription: a commit with no member, as a tool resetting offsets sends
        committer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    finally:
        committer.close()
    admin = AdminClient(sasl(node))
    found = listed_groups(admin)[group]
    assert (found.state, found.is_simple_consumer_group) == (ConsumerGroupState.EMPTY, True)
    described = described_group(admin, group)
    assert (described.state, described.members, described.partition_assignor) == (ConsumerGroupState.EMPTY, [], "")
    assert described.authorized_operations is None, "not asked for"
    http_group = "http-" + uuid.uuid4().hex[:6]
    http.json("POST", f"/v1/groups/{http_group}/members", body={"topics": [topic]}, headers=bearer(admin_token))
    assert listed_groups(admin)[http_group].state == ConsumerGroupState.STABLE, \
        "HTTP members consume: the group is not idle, though Kafka's protocol cannot show them"
    assert described_group(admin, http_group).members == []
    unknown = "never-" + uuid.uuid4().hex[:6]
    assert described_group(admin, unknown).state == ConsumerGroupState.DEAD
    assert unknown not in listed_groups(admin)
    other = AdminClient(sasl(node, LISTER, LISTER_PASSWORD))
    assert refusal(other, unknown) == KafkaError.GROUP_AUTHORIZATION_FAILED, \
        "to a user, an unknown group is one they may not see: its name tells nothing"


@pytest.mark.parametrize("version", range(6))
def test_every_advertised_version_lists_and_describes(node, http, admin_token, version):
    assert BY_KEY[LIST_GROUPS].serves(version) and BY_KEY[DESCRIBE_GROUPS].serves(version)
    topic, group = "versions-" + uuid.uuid4().hex[:6], "g-" + uuid.uuid4().hex[:6]
    create_topic(http, admin_token, topic)
    consumer = member(node, group)
    try:
        consumer.subscribe([topic])
        poll_until([consumer], lambda _: bool(consumer.assignment()))
        assert consumer.assignment()
        filters = {"states_filter": ["STABLE"], "types_filter": ["Classic"]} if version >= 4 else {}
        with authenticated(node) as sock:
            listing = send_request(sock, LIST_GROUPS, version, encode_body(LIST_GROUPS, version, filters))
            described = send_request(sock, DESCRIBE_GROUPS, version, encode_body(
                DESCRIBE_GROUPS, version, {"groups": [group, "unknown-" + group],
                                           "include_authorized_operations": False}))
        assert listing.error_code.value == 0
        (mine,) = [g for g in listing.groups if g.group_id == group]
        assert mine.protocol_type == "consumer"
        if version >= 4:
            assert mine.group_state == "Stable"
        if version >= 5:
            assert mine.group_type == "classic"
        found, unknown = described.groups
        assert (found.error_code.value, found.group_id, found.group_state, found.protocol_type,
                found.protocol_data) == (0, group, "Stable", "consumer", "range")
        (only,) = found.members
        assert only.client_host == "/127.0.0.1" and only.member_metadata and only.member_assignment
        assert getattr(only, "group_instance_id", None) is None
        assert (unknown.error_code.value, unknown.group_state, unknown.members) == (0, "Dead", ())
        if version >= 3:
            assert found.authorized_operations == -(2**31), "not asked for"
    finally:
        consumer.close()


def test_a_describe_naming_too_many_groups_closes_the_connection(node):
    body = encode_body(DESCRIBE_GROUPS, 5, {"groups": [f"g{i}" for i in range(GROUPS_PER_REQUEST_MAX + 1)],
                                            "include_authorized_operations": False})
    with authenticated(node) as sock:
        header = struct.pack(">hhih", DESCRIBE_GROUPS, 5, 9, -1) + b"\x00"
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert closed(sock)


def test_the_table_advertises_the_versions_tested_here():
    assert (BY_KEY[LIST_GROUPS].min_version, BY_KEY[LIST_GROUPS].max_version) == (0, 5)
    assert (BY_KEY[DESCRIBE_GROUPS].min_version, BY_KEY[DESCRIBE_GROUPS].max_version) == (0, 5)
