"""Topic and queue administration through real HTTP."""

from __future__ import annotations

import pytest


def test_create_describe_list_delete(http):
    created = http.json("POST", "/v1/topics", 201, body={"name": "admin.a", "partitions": 3,
                                                         "config": {"retention_ms": 60000, "flush": "always"}})
    assert created["partition_count"] == 3 and created["kind"] == "topic"
    assert created["config"]["retention_ms"] == 60000 and created["config"]["flush"] == "always"
    described = http.json("GET", "/v1/topics/admin.a")
    details = described["partitions"]
    assert [p["partition"] for p in details] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["in_sync_replicas"] == [1] for p in details)
    assert all(p["earliest_offset"] == 0 and p["latest_offset"] == 0 for p in details)
    assert "admin.a" in [t["name"] for t in http.json("GET", "/v1/topics")["topics"]]
    http.json("POST", "/v1/topics", 409, body={"name": "admin.a"})
    assert http.call("DELETE", "/v1/topics/admin.a").status == 204
    http.json("GET", "/v1/topics/admin.a", 404)
    http.json("DELETE", "/v1/topics/admin.a", 404)
    again = http.json("POST", "/v1/topics", 201, body={"name": "admin.a"})
    assert again["partitions"][0]["latest_offset"] == 0


def test_describe_without_offsets_gives_the_placement_alone(http):
    http.json("POST", "/v1/topics", 201, body={"name": "admin.placed", "partitions": 2})
    http.json("POST", "/v1/topics/admin.placed/records", body={"records": [{"value": "v", "partition": 1}]})
    full = http.json("GET", "/v1/topics/admin.placed")
    placed = http.json("GET", "/v1/topics/admin.placed?offsets=false")
    assert [p["latest_offset"] for p in full["partitions"]] == [0, 1]
    figures = ("earliest_offset", "latest_offset", "log_end_offset", "size_bytes")
    assert placed["partitions"] == [{k: v for k, v in p.items() if k not in figures} for p in full["partitions"]]
    assert placed | {"partitions": []} == full | {"partitions": []}
    assert http.json("GET", "/v1/topics/admin.placed?offsets=true") == full
    reply = http.call("GET", "/v1/topics/admin.placed?offsets=maybe")
    assert reply.status == 400 and reply.json()["code"] == "invalid_request"


def test_queue_creates_its_dead_letter_topic(http):
    queue = http.json("POST", "/v1/topics", 201, body={"name": "jobs", "kind": "queue", "partitions": 2,
                                                       "config": {"max_deliveries": 3}})
    assert queue["kind"] == "queue" and queue["config"]["dead_letter_topic"] == "jobs.dlq"
    assert queue["config"]["max_deliveries"] == 3
    assert http.json("GET", "/v1/topics/jobs.dlq")["kind"] == "topic"


@pytest.mark.parametrize("name", ["a/b", "..", ".", "has space", "x" * 201, "__internal", "", "é", "a%2Fb"])
def test_bad_names_are_refused(http, name):
    reply = http.call("POST", "/v1/topics", body={"name": name})
    assert reply.status == 400 and reply.headers["content-type"].startswith("application/problem+json")
    assert name not in [t["name"] for t in http.json("GET", "/v1/topics")["topics"]]


@pytest.mark.parametrize("body", [
    {"name": "bad.p", "partitions": 0},
    {"name": "bad.p", "partitions": "3"},
    {"name": "bad.p", "partitions": 100000},
    {"name": "bad.p", "replication_factor": 2},
    {"name": "bad.p", "kind": "stream"},
    {"name": "bad.p", "config": {"segment_bytez": 1}},
    {"name": "bad.p", "config": {"retention_ms": "soon"}},
    {"name": "bad.p", "config": {"max_deliveries": 3}},
    {"name": "bad.p", "extra": 1},
    [1, 2],
])
def test_bad_topic_bodies_are_refused(http, body):
    reply = http.call("POST", "/v1/topics", body=body)
    assert reply.status == 400, reply.data
    problem = reply.json()
    assert problem["status"] == 400 and problem["detail"] and problem["title"]
    http.json("GET", "/v1/topics/bad.p", 404)


def test_malformed_json_and_wrong_content_type(http):
    assert http.call("POST", "/v1/topics", raw=b"{nope", content_type="application/json").status == 400
    assert http.call("POST", "/v1/topics", raw=b'{"name": "x"}', content_type="text/plain").status == 415


def test_unknown_route_is_a_problem(http):
    reply = http.call("GET", "/v1/nothing-here")
    assert reply.status == 404 and reply.json()["status"] == 404
