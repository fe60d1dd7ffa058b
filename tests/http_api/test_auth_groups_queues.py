"""Groups, queues and streams on a node with authentication on: the route table's access levels
and the read check on the topics a group call names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.nodes import NodeProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("auth-gq")), *AUTH_ARGS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


def test_groups_need_read_on_their_topics_and_reset_is_for_admins(http, admin):
    owner, other = make_user(http, admin, "g.owner"), make_user(http, admin, "g.other")
    owner.json("POST", "/v1/topics", 201, body={"name": "g.owned", "partitions": 2})
    assert http.call("POST", "/v1/groups/g1/members", body={"topics": ["g.owned"]}).status == 401
    assert other.call("POST", "/v1/groups/g1/members", body={"topics": ["g.owned"]}).status == 403
    assert admin.call("GET", "/v1/groups/g1").status == 404, "the refused join created nothing"
    member = owner.json("POST", "/v1/groups/g1/members", body={"topics": ["g.owned"]})
    commit = {"member_id": member["member_id"], "generation": member["generation"],
              "offsets": [{"topic": "g.owned", "partition": 0, "offset": 0}]}
    assert other.call("POST", "/v1/groups/g1/offsets", body=commit).status == 403
    owner.json("POST", "/v1/groups/g1/offsets", body=commit)
    stream = other.call("GET", f"/v1/groups/g1/members/{member['member_id']}/stream")
    assert stream.status == 403
    owner.json("DELETE", f"/v1/groups/g1/members/{member['member_id']}", 204)
    reset = {"topic": "g.owned", "to": "earliest"}
    assert owner.call("POST", "/v1/groups/g1/offsets/reset", body=reset).status == 403
    admin.json("POST", "/v1/groups/g1/offsets/reset", body=reset)
    owner.json("PUT", "/v1/topics/g.owned/acl", body={"user": "g.other", "permissions": ["read"]})
    assert other.json("POST", "/v1/groups/g2/members", body={"topics": ["g.owned"]})["generation"] == 1


def test_queues_and_streams_follow_topic_permissions(http, admin):
    owner, other = make_user(http, admin, "q.owner"), make_user(http, admin, "q.other")
    owner.json("POST", "/v1/topics", 201, body={"name": "q.jobs", "kind": "queue"})
    send = {"records": [{"value": "job"}]}
    assert other.call("POST", "/v1/queues/q.jobs/messages", body=send).status == 403
    assert other.call("POST", "/v1/queues/q.jobs/receive", body={}).status == 403
    assert other.call("POST", "/v1/queues/q.jobs/ack", body={"receipts": ["0.0.1"]}).status == 403
    assert other.call("GET", "/v1/topics/q.jobs/partitions/0/stream?offset=0").status == 403
    owner.json("POST", "/v1/queues/q.jobs/messages", body=send)
    owner.json("PUT", "/v1/topics/q.jobs/acl", body={"user": "q.other", "permissions": ["read"]})
    assert other.call("POST", "/v1/queues/q.jobs/messages", body=send).status == 403
    messages = other.json("POST", "/v1/queues/q.jobs/receive", body={"max_messages": 5})["messages"]
    assert [m["value"] for m in messages] == ["job"]
    assert other.json("POST", "/v1/queues/q.jobs/ack", body={"receipts": [messages[0]["receipt"]]})["acked"] == 1


def test_a_member_is_acted_on_only_by_whoever_joined_it_or_an_admin(http, admin):
    owner, other = make_user(http, admin, "m.owner"), make_user(http, admin, "m.other")
    owner.json("POST", "/v1/topics", 201, body={"name": "m.topic"})
    owner.json("PUT", "/v1/topics/m.topic/acl", body={"user": "m.other", "permissions": ["read"]})
    member = owner.json("POST", "/v1/groups/mg/members", body={"topics": ["m.topic"]})
    path = f"/v1/groups/mg/members/{member['member_id']}"
    commit = {"member_id": member["member_id"], "generation": member["generation"],
              "offsets": [{"topic": "m.topic", "partition": 0, "offset": 0}]}
    assert other.call("POST", path + "/heartbeat").status == 403
    assert other.call("POST", "/v1/groups/mg/offsets", body=commit).status == 403
    assert other.call("DELETE", path).status == 403
    assert other.call("GET", path + "/stream").status == 403
    owner.json("POST", path + "/heartbeat")
    owner.json("POST", "/v1/groups/mg/offsets", body=commit)
    admin.json("POST", path + "/heartbeat")
    admin.json("DELETE", path, 204)
    assert owner.call("POST", path + "/heartbeat").status == 404


def test_a_caller_refused_the_group_gets_403_before_their_body_or_member_id_is_looked_at(http, admin):
    """The group's ``read`` is checked first (the front door's order, as the route table's was), so a
    refused caller learns nothing from how their body or member id would have been judged."""
    owner, other = make_user(http, admin, "o.owner"), make_user(http, admin, "o.other")
    owner.json("POST", "/v1/topics", 201, body={"name": "o.topic"})
    member = owner.json("POST", "/v1/groups/og/members", body={"topics": ["o.topic"]})
    assert other.call("POST", "/v1/groups/og/members", body={"topics": 5}).status == 403
    assert other.call("POST", "/v1/groups/og/offsets", body={"offsets": "x"}).status == 403
    assert other.call("POST", "/v1/groups/og/members/not%20an%20id/heartbeat").status == 403
    assert other.call("DELETE", "/v1/groups/og/members/not%20an%20id").status == 403
    assert owner.call("POST", "/v1/groups/og/members", body={"topics": 5}).status == 400
    assert owner.call("POST", "/v1/groups/og/members/not%20an%20id/heartbeat").status == 400
    assert owner.call("POST", "/v1/groups/og/offsets", body={"member_id": member["member_id"], "offsets": "x"}
                      ).status == 400
    assert http.call("POST", "/v1/groups/bad%20name/members", body={"topics": ["o.topic"]},
                     ).status == 401, "unauthenticated first"
