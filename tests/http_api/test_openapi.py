"""The OpenAPI document describes every route the application serves, and ops endpoints answer."""

from __future__ import annotations

import pytest

from http_api.app import build_app
from http_api.routing import ROUTES, route

# The sections of the explorer, logging in first (every other call needs its token).
KNOWN_TAGS = ("auth", "topics", "records", "groups", "queues", "users", "usage", "cluster", "service")


def test_document_lists_every_route(http):
    """Every API route; the pages for people (the console, the explorer) are not API."""
    document = http.json("GET", "/v1/openapi.json")
    assert document["openapi"].startswith("3.")
    served = {(r.method.lower(), r.path) for r in ROUTES if r.documented}
    assert {r.path for r in ROUTES if not r.documented} == {"/console", "/console/{asset}", "/docs", "/docs/{asset}",
                                                             "/favicon.ico"}
    described = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert served == described
    assert len(served) >= 10
    fetch = document["paths"]["/v1/topics/{name}/partitions/{partition}/records"]["get"]
    assert {p["name"] for p in fetch["parameters"]} >= {"name", "partition", "offset", "wait_ms", "max_bytes"}


def test_router_and_table_agree():
    from logbroker.config import NodeConfig
    from logbroker.node import Node

    app = build_app(Node(NodeConfig(data_dir="/nonexistent-not-opened")))
    routed = {(r.method, r.resource.canonical) for r in app.router.routes() if r.method != "HEAD"}
    assert routed == {(r.method, r.path) for r in ROUTES}


def test_health_ready_metrics_cluster(http):
    assert http.json("GET", "/healthz") == {"status": "ok"}
    ready = http.json("GET", "/readyz")
    assert ready["ready"] is True and ready["serving"] is True
    assert ready["storage"]["full"] is False and ready["storage"]["offline_partitions"] == []
    assert ready["storage"]["free_bytes"] > 0
    assert ready["coordinator"] == {"kind": "local"}, "a single node's own coordinator has no session to report"
    metrics = http.call("GET", "/metrics")
    assert metrics.status == 200 and b"logbroker_http_requests_total" in metrics.data
    cluster = http.json("GET", "/v1/cluster")
    assert cluster["nodes"][0]["node_id"] == 1 and cluster["nodes"][0]["alive"] is True
    assert cluster["coordinator"] == "local"


def test_every_operation_has_one_known_tag_and_logging_in_comes_first(http):
    document = http.json("GET", "/v1/openapi.json")
    declared = [t["name"] for t in document["tags"]]
    assert declared[0] == "auth" and set(declared) <= set(KNOWN_TAGS) and len(declared) == len(set(declared))
    assert declared == [t for t in KNOWN_TAGS if t in declared], "in the documented order"
    assert all(t["description"] for t in document["tags"])
    used = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert len(operation.get("tags", [])) == 1, (method, path, operation.get("tags"))
            assert operation["tags"][0] in declared, (method, path, operation["tags"])
            used[(method, path)] = operation["tags"][0]
    assert set(used.values()) == set(declared) == set(KNOWN_TAGS), "every section has operations"
    assert used[("post", "/v1/auth/token")] == "auth"
    assert used[("post", "/v1/topics")] == used[("post", "/v1/topics/{name}/partitions")] == "topics"
    assert used[("put", "/v1/topics/{name}/acl")] == "topics"
    assert used[("post", "/v1/topics/{name}/records")] == "records"
    assert used[("get", "/v1/topics/{name}/partitions/{partition}/records")] == "records"
    assert used[("get", "/v1/topics/{name}/partitions/{partition}/stream")] == "records"
    assert used[("post", "/v1/producers")] == "records"
    assert used[("get", "/v1/groups/{group}/members/{member}/stream")] == "groups"
    assert used[("post", "/v1/queues/{name}/receive")] == "queues"
    assert used[("get", "/v1/users")] == used[("put", "/v1/users/{name}/quotas")] == "users"
    assert used[("get", "/v1/cluster")] == used[("post", "/v1/cluster/rebalance")] == "cluster"
    assert used[("get", "/readyz")] == used[("get", "/")] == "service"


def test_a_route_outside_every_section_cannot_be_registered():
    async def handler(request):  # pragma: no cover - never registered
        raise AssertionError

    before = len(ROUTES)
    with pytest.raises(AssertionError, match="tag"):
        route("GET", "/v2/elsewhere", "Nowhere", access="user")(handler)
    with pytest.raises(AssertionError, match="tag"):
        route("GET", "/v1/topics", "Misfiled", access="user", tag="misc")(handler)
    assert len(ROUTES) == before


def test_every_operation_declares_the_refusals_of_its_shape(http):
    """A token-guarded operation declares 401, one checking a grant 403, one naming something in
    its path 400 and 404, one reading a body 400, 413 and 415; the route's own text wins."""
    document = http.json("GET", "/v1/openapi.json")
    for r in (r for r in ROUTES if r.documented):
        declared = document["paths"][r.path][r.method.lower()]["responses"]
        has_path_parameter = "{" in r.path
        assert ("401" in declared) == (r.access not in ("public", "metrics")) or "401" in r.responses, r.path
        assert ("403" in declared) == (r.access not in ("public", "metrics", "user")) or "403" in r.responses, r.path
        if has_path_parameter:
            assert {"400", "404"} <= set(declared), (r.method, r.path)
        if r.request_body is not None:
            assert {"400", "413", "415"} <= set(declared), (r.method, r.path)
        for status, text in r.responses.items():
            assert declared[status]["description"] == text
        assert all(set(answer) == {"description", "content"} for status, answer in declared.items()
                   if int(status) >= 400), r.path


def test_an_operation_taking_an_idempotency_key_declares_its_conflict(http):
    """A key reused for other records is answered 409 idempotency_conflict (the fuzzer met it)."""
    document = http.json("GET", "/v1/openapi.json")
    keyed = [r for r in ROUTES if r.documented and any(p["in"] == "header" and p["name"] == "Idempotency-Key"
                                                        for p in r.parameters)]
    assert len(keyed) >= 2
    for r in keyed:
        declared = document["paths"][r.path][r.method.lower()]["responses"]
        assert "idempotency_conflict" in declared.get("409", {}).get("description", ""), (r.method, r.path)


def test_path_parameters_say_what_the_handlers_accept(http):
    document = http.json("GET", "/v1/openapi.json")
    fetch = document["paths"]["/v1/topics/{name}/partitions/{partition}/records"]["get"]["parameters"]
    by_name = {p["name"]: p for p in fetch}
    assert by_name["name"]["schema"]["pattern"] == "^[A-Za-z0-9._-]{1,200}$"
    assert by_name["partition"]["schema"] == {"type": "integer", "minimum": 0}
    assert by_name["offset"]["required"] is True and by_name["wait_ms"]["required"] is False
    user = document["paths"]["/v1/users/{name}"]["get"]["parameters"][0]
    assert user["schema"]["pattern"] == "^[A-Za-z0-9._@-]{1,64}$"
    produce = document["paths"]["/v1/topics/{name}/records"]["post"]
    assert {"name": "Idempotency-Key", "in": "header"}.items() <= produce["parameters"][-1].items()
    assert produce["requestBody"]["content"]["application/json"]["schema"]["required"] == ["records"]
