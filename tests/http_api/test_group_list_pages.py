"""``GET /v1/groups`` a page at a time (``limit``, ``after``, ``next_after``) on a node with
authentication on: following ``next_after`` lists every group the caller may see, in name order,
once each; a user's pages never show another user's groups; bad paging input is a 400 problem."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.http_api.conftest import Http
from tests.http_api.test_auth import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.nodes import NodeProcess

PAGES_MAX = 100


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("group-pages")), *AUTH_ARGS) as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, login(http, ADMIN, ADMIN_PASSWORD))


@pytest.fixture(scope="module")
def groups(http: Http, admin: As) -> dict[str, Any]:
    """User a owns eight groups, user b two, and b holds a grant on one of a's."""
    a, b = make_user(http, admin, "pages.a"), make_user(http, admin, "pages.b")
    a.json("POST", "/v1/topics", 201, body={"name": "pages.t", "partitions": 1})
    a.json("PUT", "/v1/topics/pages.t/acl", body={"user": "pages.b", "permissions": ["read"]})
    a_groups = [f"a{i}" for i in range(8)]
    b_groups = ["b0", "zz"]
    for name in a_groups:
        a.json("POST", f"/v1/groups/{name}/members", body={"topics": ["pages.t"]})
    for name in b_groups:
        b.json("POST", f"/v1/groups/{name}/members", body={"topics": ["pages.t"]})
    a.json("PUT", "/v1/groups/a5/acl", body={"user": "pages.b", "permissions": ["read"]})
    return {"a": a, "b": b, "a_groups": a_groups, "b_groups": b_groups}


def pages(user: As, limit: int) -> list[list[str]]:
    """Every page of the caller's list, following ``next_after`` (bounded)."""
    out: list[list[str]] = []
    after = None
    for _ in range(PAGES_MAX):
        query = f"?limit={limit}" + (f"&after={after}" if after is not None else "")
        page = user.json("GET", f"/v1/groups{query}")
        names = [g["group"] for g in page["groups"]]
        assert len(names) <= limit and set(page) <= {"groups", "next_after"}
        assert all({"group", "state", "generation", "strategy", "members"} <= set(g) for g in page["groups"])
        out.append(names)
        after = page.get("next_after")
        if after is None:
            return out
        assert names and after == names[-1], "an admin's or a few groups' page is full up to its cursor"
    raise AssertionError(f"more than {PAGES_MAX} pages")


def test_following_next_after_lists_every_group_once_in_name_order(groups, admin):
    everything = sorted(groups["a_groups"] + groups["b_groups"])
    one_call = admin.json("GET", "/v1/groups")
    assert [g["group"] for g in one_call["groups"]] == everything and "next_after" not in one_call
    for limit in (1, 3, len(everything), 1000):
        walked = pages(admin, limit)
        assert [n for page in walked for n in page] == everything, limit
        assert len(walked) == -(-len(everything) // limit), "no empty page at the end"
    assert admin.json("GET", "/v1/groups?after=zz") == {"groups": []}
    assert [g["group"] for g in admin.json("GET", "/v1/groups?after=a55&limit=2")["groups"]] == ["a6", "a7"]


def test_a_users_pages_show_only_their_groups_and_grants(groups):
    a, b = groups["a"], groups["b"]
    assert [n for page in pages(b, 1) for n in page] == ["a5", "b0", "zz"]
    assert [n for page in pages(a, 2) for n in page] == groups["a_groups"]
    after_a5 = b.json("GET", "/v1/groups?after=a5")
    assert [g["group"] for g in after_a5["groups"]] == ["b0", "zz"] and "next_after" not in after_a5


@pytest.mark.parametrize("query", ["limit=0", "limit=10001", "limit=-1", "limit=abc", "limit=", "limit=%EF%BC%91",
                                   "after=", "after=a%20b", "after=__x", "after=" + "x" * 300,
                                   "after=~", "after=~bm90LWEtY3Vyc29y"])
def test_bad_paging_input_is_a_clear_400(groups, admin, query):
    reply = admin.call("GET", f"/v1/groups?{query}")
    assert reply.status == 400, reply.data
    assert reply.headers["content-type"].startswith("application/problem+json")
    # a bad cursor is refused as a bad group name in a path is (``invalid_topic``: the names' rules)
    assert reply.json()["code"] == ("invalid_request" if query.startswith(("limit", "after=~")) else "invalid_topic")


def test_the_python_client_follows_every_page(node, groups):
    import asyncio

    from logbroker.client import Client

    async def names(page_size: int | None) -> list[str]:
        async with Client(node.url, username=ADMIN, password=ADMIN_PASSWORD) as client:
            return [g["group"] for g in await client.list_groups(page_size=page_size)]

    everything = sorted(groups["a_groups"] + groups["b_groups"])
    for page_size in (None, 1, 3):
        assert asyncio.run(names(page_size)) == everything
