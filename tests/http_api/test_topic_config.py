"""Changing a live topic's config (``PATCH /v1/topics/{name}/config``) against a real node with
authentication on: the change takes effect on the open logs at once (retention, segment size,
a queue's delivery settings), is shown wherever the topic is, survives a restart, and bad input
or a caller who is not the owner or an admin changes nothing."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.replica_manager import partition_dir_name
from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.cluster import wait_until
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

HOUR_MS = 3_600_000
VALUE = "v" * 300
OBSERVE_S = 1.0  # several maintenance rounds (200 ms each) under the old rule


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("topic-config")), *AUTH_ARGS, *SMALL_SEGMENTS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


@pytest.fixture(scope="module")
def alice(http: Http, admin: As) -> As:
    return make_user(http, admin, "alice")


@pytest.fixture(scope="module")
def bob(http: Http, admin: As) -> As:
    return make_user(http, admin, "bob")


def segment_files(node: NodeProcess, topic: str) -> list[str]:
    directory = os.path.join(node.data_dir, partition_dir_name(topic, 0))
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


def produce(user: As, topic: str, count: int, *, timestamp: int | None = None) -> None:
    record: dict[str, Any] = {"value": VALUE, "partition": 0}
    if timestamp is not None:
        record["timestamp"] = timestamp
    user.json("POST", f"/v1/topics/{topic}/records", body={"records": [record] * count})


def earliest(user: As, topic: str) -> int:
    offset: int = user.json("GET", f"/v1/topics/{topic}")["partitions"][0]["earliest_offset"]
    return offset


def test_lowering_retention_deletes_the_old_segments_by_the_new_rule(node, alice):
    alice.json("POST", "/v1/topics", 201, body={"name": "cfg.retention", "config": {"segment_bytes": 1024}})
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for _ in range(20):  # one batch each: a segment rolls every three
        produce(alice, "cfg.retention", 1, timestamp=old)
    assert len(segment_files(node, "cfg.retention")) > 3
    deadline = time.monotonic() + OBSERVE_S
    while time.monotonic() < deadline:  # the default retention (7 days) keeps two-hour-old segments
        assert earliest(alice, "cfg.retention") == 0
        time.sleep(0.1)
    described = alice.json("PATCH", "/v1/topics/cfg.retention/config", body={"retention_ms": HOUR_MS})
    assert described["config"]["retention_ms"] == HOUR_MS and described["name"] == "cfg.retention"
    wait_until(lambda: len(segment_files(node, "cfg.retention")) == 1, timeout_s=10)
    kept = earliest(alice, "cfg.retention")
    assert 0 < kept < 20 and segment_files(node, "cfg.retention") == [f"{kept:020d}.log"]


def test_a_smaller_segment_size_rolls_the_active_segment_at_once(node, alice):
    alice.json("POST", "/v1/topics", 201, body={"name": "cfg.segments", "config": {"segment_bytes": 1024 * 1024}})
    for _ in range(10):
        produce(alice, "cfg.segments", 1)
    assert len(segment_files(node, "cfg.segments")) == 1
    alice.json("PATCH", "/v1/topics/cfg.segments/config", body={"segment_bytes": 1024})
    for _ in range(10):
        produce(alice, "cfg.segments", 1)
    assert len(segment_files(node, "cfg.segments")) >= 4


def test_the_change_shows_in_describe_the_cluster_view_and_the_api_document(http, alice):
    alice.json("POST", "/v1/topics", 201, body={"name": "cfg.shown", "config": {"flush": "always"}})
    changes = {"flush": "interval", "flush_ms": 250, "dedup_window_ms": 0, "timestamp_before_max_ms": HOUR_MS,
               "max_batch_bytes": 16 * 1024 * 1024}
    described = alice.json("PATCH", "/v1/topics/cfg.shown/config", body=changes)
    assert {k: described["config"][k] for k in changes} == changes
    shown = next(t for t in alice.json("GET", "/v1/cluster")["topics"] if t["name"] == "cfg.shown")
    assert shown["config"] == alice.json("GET", "/v1/topics/cfg.shown")["config"] == described["config"]
    assert shown["config"]["min_insync_replicas"] == 1
    assert "patch" in http.json("GET", "/v1/openapi.json")["paths"]["/v1/topics/{name}/config"]
    # null puts a key back to its default
    assert alice.json("PATCH", "/v1/topics/cfg.shown/config", body={"flush_ms": None})["config"]["flush_ms"] == 1000


def test_a_change_survives_a_restart(tmp_path):
    with NodeProcess(str(tmp_path), *AUTH_ARGS) as first:
        http = Http(first.url)
        admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
        admin.json("POST", "/v1/topics", 201, body={"name": "kept"})
        admin.json("PATCH", "/v1/topics/kept/config", body={"retention_ms": HOUR_MS, "flush": "always"})
    with NodeProcess(str(tmp_path), *AUTH_ARGS) as second:
        http = Http(second.url)
        config = As(http, login(http, ADMIN, ADMIN_PASSWORD)).json("GET", "/v1/topics/kept")["config"]
    assert (config["retention_ms"], config["flush"]) == (HOUR_MS, "always")


def test_a_queues_delivery_settings_change_on_the_live_queue(alice):
    alice.json("POST", "/v1/topics", 201, body={"name": "cfg.jobs", "kind": "queue", "config": {"max_deliveries": 5}})
    assert alice.json("GET", "/v1/queues/cfg.jobs")["max_deliveries"] == 5
    described = alice.json("PATCH", "/v1/topics/cfg.jobs/config",
                           body={"max_deliveries": 2, "visibility_timeout_ms": 60_000})
    assert described["config"]["max_deliveries"] == 2 and described["config"]["visibility_timeout_ms"] == 60_000
    live = alice.json("GET", "/v1/queues/cfg.jobs")
    assert live["max_deliveries"] == 2 and live["visibility_timeout_ms"] == 60_000


def test_only_the_owner_or_an_admin_may_change_it(http, alice, bob, admin):
    alice.json("POST", "/v1/topics", 201, body={"name": "cfg.owned"})
    alice.json("PUT", "/v1/topics/cfg.owned/acl", body={"user": "bob", "permissions": ["read", "write"]})
    before = alice.json("GET", "/v1/topics/cfg.owned")["config"]
    reply = bob.call("PATCH", "/v1/topics/cfg.owned/config", body={"retention_ms": 1})
    assert reply.status == 403 and reply.headers["content-type"].startswith("application/problem+json")
    assert http.call("PATCH", "/v1/topics/cfg.owned/config", body={"retention_ms": 1}).status == 401
    assert alice.json("GET", "/v1/topics/cfg.owned")["config"] == before
    assert admin.json("PATCH", "/v1/topics/cfg.owned/config", body={"retention_ms": 1})["config"]["retention_ms"] == 1
    assert alice.call("PATCH", "/v1/topics/cfg.nothing/config", body={"retention_ms": 1}).status in (403, 404)
    assert admin.call("PATCH", "/v1/topics/cfg.nothing/config", body={"retention_ms": 1}).status == 404
    assert admin.call("PATCH", "/v1/topics/__consumer_offsets/config", body={"retention_ms": 1}).status == 400


@pytest.mark.parametrize(("body", "says"), [
    ({"retention_mz": 1}, "unknown config key"),
    ({"segment_bytes": 10}, "segment_bytes"),
    ({"retention_ms": "soon"}, "retention_ms"),
    ({"flush": 3}, "flush"),
    ({"min_insync_replicas": 2}, "min_insync_replicas"),
    ({"partitions": 4}, "partitions"),
    ({"replication_factor": 1}, "replication_factor"),
    ({"name": "x"}, "renamed"),
    ({"cleanup_policy": "compacted"}, "cleanup_policy"),
    ({"min_cleanable_dirty_ratio": "half"}, "min_cleanable_dirty_ratio"),
    ({"segment_index_bytes": 1048576}, "segment_index_bytes"),
    ({"max_batch_bytes": 1024}, "max_batch_bytes"),
    ({}, "non-empty"),
    ([1], "non-empty"),
])
def test_bad_changes_are_a_400_naming_the_key_and_change_nothing(alice, body, says):
    alice.call("POST", "/v1/topics", body={"name": "cfg.bad"})
    before = alice.json("GET", "/v1/topics/cfg.bad")["config"]
    reply = alice.call("PATCH", "/v1/topics/cfg.bad/config", body=body)
    assert reply.status == 400 and reply.headers["content-type"].startswith("application/problem+json"), reply
    problem = reply.json()
    assert problem["code"] == "invalid_topic" and says in problem["detail"], problem
    assert alice.json("GET", "/v1/topics/cfg.bad")["config"] == before


def test_a_body_that_is_not_json_is_a_400(alice):
    alice.call("POST", "/v1/topics", body={"name": "cfg.bad"})
    reply = alice.call("PATCH", "/v1/topics/cfg.bad/config", raw=b"{retention_ms: 1", content_type="application/json")
    assert reply.status == 400


values = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**40, max_value=2**40), st.text(max_size=8),
                   st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=2))
keys = st.one_of(st.sampled_from(["retention_ms", "segment_bytes", "flush", "flush_ms", "min_insync_replicas",
                                  "partitions", "segment_index_bytes", "max_batch_bytes", "kind"]),
                 st.text(min_size=1, max_size=8))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(keys, values, min_size=1, max_size=3))
def test_any_body_is_either_applied_exactly_or_refused_with_nothing_changed(alice, body):
    alice.call("POST", "/v1/topics", body={"name": "cfg.fuzz"})
    before = alice.json("GET", "/v1/topics/cfg.fuzz")["config"]
    reply = alice.call("PATCH", "/v1/topics/cfg.fuzz/config", body=body)
    after = alice.json("GET", "/v1/topics/cfg.fuzz")["config"]
    if reply.status == 400:
        assert reply.json()["detail"] and after == before
        return
    assert reply.status == 200, (reply.status, reply.data[:300])
    assert reply.json()["config"] == after
    for key, value in body.items():
        if value is not None and not isinstance(value, str):
            assert after[key] == value, (key, value, after)
    reset = {key: None for key in body if key != "max_batch_bytes"}  # it may only grow
    if reset:
        alice.json("PATCH", "/v1/topics/cfg.fuzz/config", body=reset)
