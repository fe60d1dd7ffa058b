"""Isolation between users on a node with authentication on (issue 14): consumer groups are
resources with owners and grants, a member id is not a credential, a group can be deleted for
good, dead-letter names cannot be squatted silently, and a 409 names no owner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.nodes import NodeProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("isolation")), *AUTH_ARGS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


def two_users(http: Http, admin: As, prefix: str, topic: str) -> tuple[As, As]:
    """User a owning ``topic`` (2 partitions), and user b who may read it (so only the group stops b)."""
    a, b = make_user(http, admin, f"{prefix}.a"), make_user(http, admin, f"{prefix}.b")
    a.json("POST", "/v1/topics", 201, body={"name": topic, "partitions": 2})
    a.json("PUT", f"/v1/topics/{topic}/acl", body={"user": f"{prefix}.b", "permissions": ["read"]})
    return a, b


def test_a_stranger_cannot_list_describe_join_or_bump_a_group(http, admin):
    a, b = two_users(http, admin, "iso1", "iso1.t")
    member = a.json("POST", "/v1/groups/ag/members", body={"topics": ["iso1.t"], "assignment_strategy": "range"})
    assert "ag" not in [g["group"] for g in b.json("GET", "/v1/groups")["groups"]]
    assert "ag" in [g["group"] for g in a.json("GET", "/v1/groups")["groups"]]
    assert "ag" in [g["group"] for g in admin.json("GET", "/v1/groups")["groups"]]
    for reply in (b.call("GET", "/v1/groups/ag"),
                  b.call("POST", "/v1/groups/ag/members", body={"topics": ["iso1.t"], "assignment_strategy": "sticky"}),
                  b.call("POST", "/v1/groups/ag/members", body={"topics": ["iso1.t"]}),
                  b.call("GET", "/v1/groups/ag/acl"),
                  b.call("PUT", "/v1/groups/ag/acl", body={"user": "iso1.b", "permissions": ["read"]}),
                  b.call("DELETE", "/v1/groups/ag"),
                  b.call("POST", f"/v1/groups/ag/members/{member['member_id']}/heartbeat"),
                  b.call("GET", f"/v1/groups/ag/members/{member['member_id']}/stream")):
        assert reply.status == 403, reply.data
        assert b"iso1.a" not in reply.data, "a refusal names no owner"
    beat = a.json("POST", f"/v1/groups/ag/members/{member['member_id']}/heartbeat")
    assert beat["generation"] == member["generation"], "b's refused joins started no generation"
    second = a.json("POST", "/v1/groups/ag/members", body={"topics": ["iso1.t"], "assignment_strategy": "range"})
    assert second["strategy"] == "range"
    # an unknown group looks like a forbidden one to users; admins see 404
    assert b.call("GET", "/v1/groups/no-such-group").status == 403
    assert admin.call("GET", "/v1/groups/no-such-group").status == 404
    assert a.json("GET", "/v1/groups/ag/acl") == {"group": "ag", "owner": "iso1.a", "acl": []}


def test_a_member_id_is_not_a_credential(http, admin):
    a, b = two_users(http, admin, "iso2", "iso2.t")
    member = a.json("POST", "/v1/groups/tg/members", body={"topics": ["iso2.t"]})
    a.json("PUT", "/v1/groups/tg/acl", body={"user": "iso2.b", "permissions": ["read"]})
    takeover = b.call("POST", "/v1/groups/tg/members", body={"topics": ["iso2.t"], "member_id": member["member_id"]})
    assert takeover.status == 403 and takeover.json()["code"] == "forbidden"
    view = a.json("GET", "/v1/groups/tg")
    assert [(m["member_id"], m["principal"]) for m in view["members"]] == [(member["member_id"], "iso2.a")]
    beat = a.json("POST", f"/v1/groups/tg/members/{member['member_id']}/heartbeat")
    commit = {"member_id": member["member_id"], "generation": beat["generation"],
              "offsets": [{"topic": "iso2.t", "partition": p, "offset": 0} for p in beat["assignment"]["iso2.t"]]}
    a.json("POST", "/v1/groups/tg/offsets", body=commit)
    assert b.call("POST", "/v1/groups/tg/offsets", body=commit).status == 403
    assert b.call("DELETE", f"/v1/groups/tg/members/{member['member_id']}").status == 403
    a.json("DELETE", f"/v1/groups/tg/members/{member['member_id']}", 204)


def test_a_grant_lets_a_user_join_and_see_only_their_own_members(http, admin):
    a, b = two_users(http, admin, "iso3", "iso3.t")
    mine = a.json("POST", "/v1/groups/sg/members", body={"topics": ["iso3.t"]})
    assert a.call("PUT", "/v1/groups/sg/acl", body={"user": "iso3.b", "permissions": ["write"]}).status == 400
    assert a.call("PUT", "/v1/groups/sg/acl", body={"user": "nobody.here", "permissions": ["read"]}).status == 404
    granted = a.json("PUT", "/v1/groups/sg/acl", body={"user": "iso3.b", "permissions": ["read"]})
    assert granted == {"group": "sg", "owner": "iso3.a", "acl": [{"user": "iso3.b", "permissions": ["read"]}]}
    theirs = b.json("POST", "/v1/groups/sg/members", body={"topics": ["iso3.t"]})
    assert theirs["generation"] == mine["generation"] + 1
    assert "sg" in [g["group"] for g in b.json("GET", "/v1/groups")["groups"]]
    seen_by_b = b.json("GET", "/v1/groups/sg")
    assert [m["member_id"] for m in seen_by_b["members"]] == [theirs["member_id"]]
    assert set(seen_by_b["assignment"]) == {theirs["member_id"]}
    assert {o["member_id"] for o in seen_by_b["offsets"]} <= {theirs["member_id"], None}
    assert mine["member_id"] not in str(seen_by_b)
    seen_by_a = a.json("GET", "/v1/groups/sg")
    assert {m["principal"] for m in seen_by_a["members"]} == {"iso3.a", "iso3.b"}
    assert b.call("DELETE", "/v1/groups/sg").status == 403, "a grant does not allow deleting"
    assert b.call("PUT", "/v1/groups/sg/acl", body={"user": "iso3.b", "permissions": ["read"]}).status == 403
    a.json("PUT", "/v1/groups/sg/acl", body={"user": "iso3.b", "permissions": []})
    assert b.call("POST", "/v1/groups/sg/members", body={"topics": ["iso3.t"]}).status == 403
    assert b.call("POST", f"/v1/groups/sg/members/{theirs['member_id']}/heartbeat").status == 403


def test_a_deleted_group_and_its_offsets_stay_deleted_after_a_restart(tmp_path):
    with NodeProcess(str(tmp_path), *AUTH_ARGS) as process:
        http = Http(process.url)
        admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
        a, b = two_users(http, admin, "iso4", "iso4.t")
        a.json("POST", "/v1/topics/iso4.t/records", body={"records": [{"value": "x", "partition": 0}]})
        for group in ("dg", "kept"):
            member = a.json("POST", f"/v1/groups/{group}/members", body={"topics": ["iso4.t"]})
            commit = {"member_id": member["member_id"], "generation": member["generation"],
                      "offsets": [{"topic": "iso4.t", "partition": 0, "offset": 1}]}
            a.json("POST", f"/v1/groups/{group}/offsets", body=commit)
            if group == "dg":
                refused = a.call("DELETE", "/v1/groups/dg")
                assert refused.status == 409 and refused.json()["code"] == "group_not_empty"
            a.json("DELETE", f"/v1/groups/{group}/members/{member['member_id']}", 204)
        assert b.call("DELETE", "/v1/groups/dg").status == 403
        a.json("DELETE", "/v1/groups/dg", 204)
        assert admin.call("GET", "/v1/groups/dg").status == 404
        assert a.call("DELETE", "/v1/groups/dg").status == 403, "the name is no longer a's"
    with NodeProcess(str(tmp_path), *AUTH_ARGS) as process:
        http = Http(process.url)
        admin = As(http, login(http, ADMIN, ADMIN_PASSWORD))
        b = As(http, login(http, "iso4.b", "password-of-a-user"))
        assert admin.call("GET", "/v1/groups/dg").status == 404
        names = [g["group"] for g in admin.json("GET", "/v1/groups")["groups"]]
        assert "dg" not in names and "kept" in names
        kept = admin.json("GET", "/v1/groups/kept")["offsets"]
        assert [o["committed_offset"] for o in kept if o["partition"] == 0] == [1]
        # the name is free again: b claims it and finds no offsets of a's group
        b.json("POST", "/v1/groups/dg/members", body={"topics": ["iso4.t"]})
        assert b.json("GET", "/v1/groups/dg/acl")["owner"] == "iso4.b"
        assert all(o["committed_offset"] is None for o in b.json("GET", "/v1/groups/dg")["offsets"])


def test_metrics_public_opens_the_scrape_to_anyone(tmp_path):
    with NodeProcess(str(tmp_path), *AUTH_ARGS, "--metrics-public", "true") as process:
        scraped = Http(process.url).call("GET", "/metrics")
        assert scraped.status == 200 and b"logbroker_http_requests_total" in scraped.data


def test_a_taken_dead_letter_name_is_refused_with_a_way_out(http, admin):
    a, b = make_user(http, admin, "iso5.a"), make_user(http, admin, "iso5.b")
    b.json("POST", "/v1/topics", 201, body={"name": "jobs.dlq"})
    refused = a.call("POST", "/v1/topics", body={"name": "jobs", "kind": "queue"})
    assert refused.status == 409
    assert "dead_letter_topic" in refused.json()["detail"] and "iso5.b" not in refused.data.decode()
    assert a.call("GET", "/v1/topics/jobs").status == 403, "the refused queue was not created"
    queue = a.json("POST", "/v1/topics", 201,
                   body={"name": "jobs", "kind": "queue", "config": {"dead_letter_topic": "jobs.dead"}})
    assert queue["config"]["dead_letter_topic"] == "jobs.dead"


def test_a_conflict_on_create_names_no_owner(http, admin):
    a, b = make_user(http, admin, "iso6.a"), make_user(http, admin, "iso6.b")
    a.json("POST", "/v1/topics", 201, body={"name": "payments"})
    refused = b.call("POST", "/v1/topics", body={"name": "payments"})
    assert refused.status == 409 and refused.json()["detail"] == "'payments' already exists"
    assert "iso6.a" not in refused.data.decode()
