"""The group endpoints over real HTTP: commits, fencing, describe and list, reset, bad input."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.processes import wait_for


@pytest.fixture(scope="module")
def topic(http):
    http.json("POST", "/v1/topics", expect=201, body={"name": "gt", "partitions": 4})
    http.json("POST", "/v1/topics/gt/records", body={"records": [{"value": str(i), "partition": i % 4}
                                                                 for i in range(40)]})
    return "gt"


def join(http, group, **extra):
    return http.json("POST", f"/v1/groups/{group}/members", body={"topics": ["gt"], "session_timeout_ms": 30000,
                                                                  **extra})


def test_commit_describe_and_lag(http, topic):
    member = join(http, "g1")
    assert member["generation"] == 1 and member["assignment"] == {"gt": [0, 1, 2, 3]}
    assert member["heartbeat_interval_ms"] == 10000
    http.json("POST", "/v1/groups/g1/offsets", body={"member_id": member["member_id"], "generation": 1,
                                                     "offsets": [{"topic": "gt", "partition": 0, "offset": 4}]})
    described = http.json("GET", "/v1/groups/g1")
    by_partition = {o["partition"]: o for o in described["offsets"]}
    assert by_partition[0]["committed_offset"] == 4 and by_partition[0]["lag"] == 6
    assert by_partition[1]["committed_offset"] is None and by_partition[1]["lag"] is None
    assert described["members"][0]["member_id"] == member["member_id"]
    metrics = http.call("GET", "/metrics").data.decode()
    assert 'logbroker_group_lag{group="g1",partition="0",topic="gt"} 6.0' in metrics
    assert 'logbroker_group_members{group="g1"} 1.0' in metrics
    assert {"group": "g1", "state": "stable", "generation": 1, "strategy": "range", "members": 1} in \
        http.json("GET", "/v1/groups")["groups"]
    http.json("DELETE", f"/v1/groups/g1/members/{member['member_id']}", expect=204)
    assert http.json("GET", "/v1/groups/g1")["state"] == "empty"


def test_stale_generation_is_409_and_changes_nothing(http, topic):
    first = join(http, "g2", assignment_strategy="sticky")
    second = join(http, "g2")
    assert second["generation"] == 2
    stale = http.call("POST", "/v1/groups/g2/offsets", body={
        "member_id": first["member_id"], "generation": 1, "offsets": [{"topic": "gt", "partition": 0, "offset": 1}]})
    assert stale.status == 409 and stale.json()["code"] == "stale_generation"
    beat = http.json("POST", f"/v1/groups/g2/members/{first['member_id']}/heartbeat")
    theirs = http.json("POST", f"/v1/groups/g2/members/{second['member_id']}/heartbeat")["assignment"]["gt"]
    assert beat["generation"] == 2 and set(beat["assignment"]["gt"]).isdisjoint(theirs)
    wrong = http.call("POST", "/v1/groups/g2/offsets", body={
        "member_id": first["member_id"], "generation": 2,
        "offsets": [{"topic": "gt", "partition": theirs[0], "offset": 1}]})
    assert wrong.status == 409 and wrong.json()["code"] == "not_assigned"
    assert all(o["committed_offset"] is None for o in http.json("GET", "/v1/groups/g2")["offsets"])
    mismatch = http.call("POST", "/v1/groups/g2/members", body={"topics": ["gt"], "assignment_strategy": "range"})
    assert mismatch.status == 409 and mismatch.json()["code"] == "inconsistent_strategy"


def test_a_commit_arriving_after_a_later_numbered_one_leaves_its_partitions_as_they_are(http, topic):
    """A member's commit that reaches the node late (its client gave up; TCP delivered it after a
    partition healed) must not move offsets back past a commit the member numbered later."""
    member = join(http, "g-seq")
    mid, generation = member["member_id"], member["generation"]

    def commit(sequence, offsets):
        body = {"member_id": mid, "generation": generation,
                "offsets": [{"topic": "gt", "partition": p, "offset": o} for p, o in offsets.items()]}
        if sequence is not None:
            body["sequence"] = sequence
        return http.json("POST", "/v1/groups/g-seq/offsets", body=body)

    def committed():
        return {o["partition"]: o["committed_offset"] for o in http.json("GET", "/v1/groups/g-seq")["offsets"]}

    assert commit(5, {0: 8, 1: 9})["superseded"] == []
    late = commit(3, {0: 2, 1: 3, 2: 4})  # partition 2 was never written by a later commit: it applies
    assert late["committed"] == 1
    assert sorted(s["partition"] for s in late["superseded"]) == [0, 1]
    assert committed() == {0: 8, 1: 9, 2: 4, 3: None}
    assert commit(4, {0: 1})["superseded"] == [{"topic": "gt", "partition": 0}]
    assert commit(5, {0: 8})["superseded"] == [] and committed()[0] == 8, "the same commit sent again applies"
    assert commit(6, {0: 1})["superseded"] == [] and committed()[0] == 1, "a later number may move back (a seek)"
    assert commit(None, {1: 0})["superseded"] == [] and committed()[1] == 0, "no number: arrival order, as before"
    http.json("DELETE", f"/v1/groups/g-seq/members/{mid}", expect=204)


def test_reset_offsets_only_while_empty(http, topic):
    member = join(http, "g3")
    busy = http.call("POST", "/v1/groups/g3/offsets/reset", body={"topic": "gt", "to": "latest"})
    assert busy.status == 409 and busy.json()["code"] == "group_not_empty"
    http.json("DELETE", f"/v1/groups/g3/members/{member['member_id']}", expect=204)
    latest = http.json("POST", "/v1/groups/g3/offsets/reset", body={"topic": "gt", "to": "latest"})
    assert latest["offsets"] == [{"partition": p, "offset": 10} for p in range(4)]
    explicit = http.json("POST", "/v1/groups/g3/offsets/reset", body={
        "topic": "gt", "to": "offsets", "offsets": [{"partition": 2, "offset": 3}]})
    assert explicit["offsets"] == [{"partition": 2, "offset": 3}]
    http.json("POST", "/v1/groups/g3/offsets/reset", body={"topic": "gt", "to": "earliest", "partitions": [1]})
    by_timestamp = http.json("POST", "/v1/groups/g3/offsets/reset", body={"topic": "gt", "to": "timestamp",
                                                                          "timestamp": 0, "partitions": [3]})
    assert by_timestamp["offsets"] == [{"partition": 3, "offset": 0}]
    committed = {o["partition"]: o["committed_offset"] for o in http.json("GET", "/v1/groups/g3")["offsets"]}
    assert committed == {0: 10, 1: 0, 2: 3, 3: 0}
    past = http.call("POST", "/v1/groups/g3/offsets/reset", body={
        "topic": "gt", "to": "offsets", "offsets": [{"partition": 0, "offset": 11}]})
    assert past.status == 400


BAD = [
    ("POST", "/v1/groups/g4/members", {"topics": []}, 400),
    ("POST", "/v1/groups/g4/members", {"topics": ["nope"]}, 404),
    ("POST", "/v1/groups/g4/members", {"topics": ["gt"], "session_timeout_ms": 5}, 400),
    ("POST", "/v1/groups/g4/members", {"topics": ["gt"], "assignment_strategy": "best"}, 400),
    ("POST", "/v1/groups/g4/members", {"topics": ["gt"], "extra": 1}, 400),
    ("POST", "/v1/groups/__g/members", {"topics": ["gt"]}, 400),
    ("POST", "/v1/groups/g4/members/abc/heartbeat", None, 404),
    ("POST", "/v1/groups/g4/members/a%20b/heartbeat", None, 400),
    ("DELETE", "/v1/groups/g4/members/abc", None, 404),
    ("GET", "/v1/groups/never-seen", None, 404),
    ("POST", "/v1/groups/g4/offsets", {"member_id": "abc", "generation": 1,
                                      "offsets": [{"topic": "gt", "partition": 0, "offset": 1}]}, 404),
    ("POST", "/v1/groups/g4/offsets", {"member_id": "abc", "generation": 1,
                                      "offsets": [{"topic": "gt", "partition": 9, "offset": 1}]}, 404),
    ("POST", "/v1/groups/g4/offsets", {"member_id": "abc", "generation": "1", "offsets": []}, 400),
    ("POST", "/v1/groups/g4/offsets", {"member_id": "abc", "generation": 1, "offsets": [
        {"topic": "gt", "partition": 0, "offset": 1}, {"topic": "gt", "partition": 0, "offset": 2}]}, 400),
    ("POST", "/v1/groups/g4/offsets", {"member_id": "abc", "generation": 1, "sequence": -1,
                                      "offsets": [{"topic": "gt", "partition": 0, "offset": 1}]}, 400),
    ("POST", "/v1/groups/g4/offsets", {"member_id": "abc", "generation": 1, "sequence": "7",
                                      "offsets": [{"topic": "gt", "partition": 0, "offset": 1}]}, 400),
    ("POST", "/v1/groups/g4/offsets/reset", {"topic": "gt", "to": "timestamp"}, 400),
    ("POST", "/v1/groups/g4/offsets/reset", {"topic": "gt", "to": "somewhere"}, 400),
    ("POST", "/v1/groups/g4/offsets/reset", {"topic": "nope", "to": "latest"}, 404),
]


@pytest.mark.parametrize(("method", "path", "body", "status"), BAD)
def test_bad_requests_are_refused(http, topic, method, path, body, status):
    reply = http.call(method, path, body=body)
    assert reply.status == status, reply.data
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert http.call("GET", "/v1/groups/g4").status == 404, "nothing was created"


def test_non_json_body_is_refused(http, topic):
    assert http.call("POST", "/v1/groups/g5/members", raw=b"{", content_type="application/json").status == 400
    assert http.call("POST", "/v1/groups/g5/members", raw=b"x", content_type="text/plain").status == 415


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=8)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(["topics", "session_timeout_ms", "assignment_strategy", "member_id",
                                             "offsets", "generation", "to", "topic"]), json_values, max_size=4))
def test_arbitrary_bodies_never_crash(http, topic, body):
    for path in ("/v1/groups/g6/members", "/v1/groups/g6/offsets", "/v1/groups/g6/offsets/reset"):
        reply = http.call("POST", path, body=body)
        assert reply.status < 500, reply.data
        if reply.status == 200 and path.endswith("/members"):
            http.call("DELETE", f"/v1/groups/g6/members/{reply.json()['member_id']}")


def test_a_deleted_topic_leaves_the_assignment_in_a_new_generation(http, topic):
    http.json("POST", "/v1/topics", expect=201, body={"name": "gone", "partitions": 2})
    member = http.json("POST", "/v1/groups/g7/members", body={"topics": ["gt", "gone"], "session_timeout_ms": 30000})
    assert member["assignment"] == {"gone": [0, 1], "gt": [0, 1, 2, 3]}
    http.json("DELETE", "/v1/topics/gone", expect=204)

    def moved():
        beat = http.json("POST", f"/v1/groups/g7/members/{member['member_id']}/heartbeat")
        return beat if beat["generation"] > member["generation"] else None

    beat = wait_for(moved, 10, "a rebalance after the topic went away")
    assert beat["assignment"] == {"gt": [0, 1, 2, 3]}
    http.json("DELETE", f"/v1/groups/g7/members/{member['member_id']}", expect=204)


def test_added_partitions_rebalance_the_group(http, topic):
    http.json("POST", "/v1/topics", expect=201, body={"name": "grows", "partitions": 2})
    first = http.json("POST", "/v1/groups/g8/members", body={"topics": ["grows"], "session_timeout_ms": 30000,
                                                             "assignment_strategy": "sticky"})
    second = http.json("POST", "/v1/groups/g8/members", body={"topics": ["grows"], "session_timeout_ms": 30000})
    before = {m: http.json("POST", f"/v1/groups/g8/members/{m}/heartbeat")["assignment"]["grows"]
              for m in (first["member_id"], second["member_id"])}
    grown = http.json("POST", "/v1/topics/grows/partitions", body={"partitions": 6})
    assert grown["partition_count"] == 6 and len(grown["partitions"]) == 6

    def rebalanced():
        beats = {m: http.json("POST", f"/v1/groups/g8/members/{m}/heartbeat") for m in before}
        return beats if all(b["generation"] == second["generation"] + 1 for b in beats.values()) else None

    beats = wait_for(rebalanced, 10, "a rebalance after partitions were added")
    after = {m: b["assignment"]["grows"] for m, b in beats.items()}
    assert sorted(p for ps in after.values() for p in ps) == list(range(6))
    assert all(set(before[m]) <= set(after[m]) for m in before), "sticky keeps what each member had"
    http.json("POST", "/v1/topics/grows/records", body={"records": [{"value": "new", "partition": 5}]})
    assert http.json("GET", "/v1/topics/grows/partitions/5/offsets")["offset"] == 1
    for body, status in (({"partitions": 6}, 400), ({"partitions": 2}, 400), ({"partitions": "7"}, 400),
                         ({"count": 7}, 400), ({"partitions": 5000}, 400)):
        assert http.call("POST", "/v1/topics/grows/partitions", body=body).status == status, body
    assert http.call("POST", "/v1/topics/nope/partitions", body={"partitions": 3}).status == 404
    assert http.call("POST", "/v1/topics/__consumer_offsets/partitions", body={"partitions": 99}).status == 400
    assert http.json("GET", "/v1/topics/grows")["partition_count"] == 6


def test_internal_topics_are_not_written_or_deleted_by_clients(http, topic):
    listed = {t["name"] for t in http.json("GET", "/v1/topics?internal=true")["topics"]}
    assert "__consumer_offsets" in listed
    assert "__consumer_offsets" not in {t["name"] for t in http.json("GET", "/v1/topics")["topics"]}
    assert http.call("GET", "/v1/topics?internal=maybe").status == 400
    reply = http.call("POST", "/v1/topics/__consumer_offsets/records", body={"records": [{"value": "x"}]})
    assert reply.status == 400 and "internal" in reply.json()["detail"]
    batch = http.call("POST", "/v1/topics/__consumer_offsets/records?partition=0", raw=b"x" * 80,
                      content_type="application/vnd.logbroker.batch")
    assert batch.status == 400
    assert http.call("DELETE", "/v1/topics/__consumer_offsets").status == 400
    assert http.json("GET", "/v1/topics/__consumer_offsets")["partition_count"] == 8
