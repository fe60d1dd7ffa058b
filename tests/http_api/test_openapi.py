"""The OpenAPI document describes every route the application serves, and ops endpoints answer."""

from __future__ import annotations

from http_api.app import build_app
from http_api.routing import ROUTES


def test_document_lists_every_route(http):
    """Every API route; the pages for people (the console, the explorer) are not API."""
    document = http.json("GET", "/v1/openapi.json")
    assert document["openapi"].startswith("3.")
    served = {(r.method.lower(), r.path) for r in ROUTES if r.documented}
    assert {r.path for r in ROUTES if not r.documented} == {"/console", "/console/{asset}", "/docs", "/docs/{asset}"}
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
    metrics = http.call("GET", "/metrics")
    assert metrics.status == 200 and b"logbroker_http_requests_total" in metrics.data
    cluster = http.json("GET", "/v1/cluster")
    assert cluster["nodes"][0]["node_id"] == 1 and cluster["nodes"][0]["alive"] is True


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
