"""``cleanup_policy`` through real HTTP: topics take ``delete`` (retention applies, run by the
node's maintenance), ``compact`` and ``compact,delete`` (decision 0321); a queue refuses
compaction with a 400 that says what is supported, and nothing is created."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

POLL_DEADLINE_S = 20.0
SETTLE_S = 1.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A node that lets a topic have 1 KiB segments, so retention has closed segments to delete."""
    with NodeProcess(str(tmp_path_factory.mktemp("node")), *SMALL_SEGMENTS) as process:
        yield process


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_compact_is_refused_for_queues(http, policy):
    reply = http.call("POST", "/v1/topics", body={"name": "compacted.queue", "kind": "queue",
                                                  "config": {"cleanup_policy": policy}})
    assert reply.status == 400, reply.data
    problem = reply.json()
    assert problem["code"] == "invalid_topic"
    assert policy in problem["detail"] and "'delete'" in problem["detail"] and "queues" in problem["detail"]
    http.json("GET", "/v1/topics/compacted.queue", 404)
    http.json("GET", "/v1/topics/compacted.queue.dlq", 404)


@pytest.mark.parametrize("policy", ["compact", "delete,compact"])
def test_topics_take_compaction(http, policy):
    name = "compacted." + policy.replace(",", "-")
    created = http.json("POST", "/v1/topics", 201, body={"name": name, "config": {
        "cleanup_policy": policy, "min_cleanable_dirty_ratio": 0.1, "delete_retention_ms": 1000}})
    assert created["config"]["cleanup_policy"] == ("compact" if policy == "compact" else "compact,delete")
    assert http.json("GET", f"/v1/topics/{name}")["config"]["min_cleanable_dirty_ratio"] == 0.1


def test_delete_is_the_default_and_retention_removes_old_segments(http):
    http.json("POST", "/v1/topics", 201, body={"name": "retained", "config": {
        "cleanup_policy": "delete", "segment_bytes": 1024, "retention_bytes": 2048}})
    assert http.json("GET", "/v1/topics/retained")["config"]["cleanup_policy"] == "delete"
    for i in range(40):
        http.json("POST", "/v1/topics/retained/records", body={"records": [{"value": f"{i:03d}" + "x" * 100}]})
    # Maintenance runs every 200 ms, during the produces too: wait until retention has settled
    # (the earliest offset is past 0 and unchanged over several rounds).
    deadline = time.monotonic() + POLL_DEADLINE_S
    earliest, previous = -1, -2
    while (earliest == 0 or earliest != previous) and time.monotonic() < deadline:
        previous = earliest
        time.sleep(SETTLE_S)
        earliest = http.json("GET", "/v1/topics/retained")["partitions"][0]["earliest_offset"]
    assert earliest > 0, "retention never removed a segment"
    records = http.json("GET", f"/v1/topics/retained/partitions/0/records?offset={earliest}")["records"]
    assert records[0]["offset"] == earliest and records[0]["value"].startswith(f"{earliest:03d}")
    assert http.json("GET", "/v1/topics/retained")["partitions"][0]["latest_offset"] == 40
    assert http.json("POST", "/v1/topics", 201, body={"name": "plain"})["config"]["cleanup_policy"] == "delete"
