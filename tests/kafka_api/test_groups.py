"""Kafka consumer groups on a real node through librdkafka (``confluent-kafka``): members split a
topic's partitions, commits are the broker's committed offsets (also over HTTP), a consumer
resumes where its group committed, and a group belongs to the user who first used it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.kafka_api.test_listener import TIMEOUT_S, USER, USER_PASSWORD, create_topic, produce, sasl
from tests.support.auth import bearer, login
from tests.support.nodes import NodeProcess


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
