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
