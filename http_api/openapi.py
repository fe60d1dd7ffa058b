"""The OpenAPI 3 document, generated from the route table (``http_api.routing.ROUTES``).

An operation lists its own answers (the route's ``responses``) and the refusals every route of its
shape can give, whatever it does: bad input where it takes any, no or a revoked token where one is
needed, a refused grant where one is checked, an unknown name where the path has one, and a body
that is too large or not JSON where it reads one. A client (or a fuzzer checking status codes
against the document) then meets no status the document does not name. Each operation carries its
route's tag, and the document lists the tags in use in the route table's order (``TAGS``: logging
in first), which is the order the explorer shows them in."""

from __future__ import annotations

from typing import Any

from http_api.routing import ROUTES, TAGS, Route

PROBLEM_SCHEMA = {"type": "object", "properties": {
    "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
    "detail": {"type": "string"}, "code": {"type": "string"}, "retriable": {"type": "boolean"}}}


def refusals(r: Route) -> dict[str, str]:
    """The statuses any route shaped like ``r`` may answer (its own text for a status wins)."""
    answers: dict[str, str] = {}
    path_parameters = [p for p in r.parameters if p["in"] == "path"]
    if r.parameters or r.request_body is not None:
        answers["400"] = "Invalid input"
    if r.access not in ("public", "metrics"):
        answers["401"] = "No token, or an expired or revoked one"
    if r.access not in ("public", "metrics", "user"):
        answers["403"] = "Not allowed"
    if path_parameters:
        answers["404"] = "Unknown " + " or ".join(p["name"] for p in path_parameters)
    if r.request_body is not None:
        answers["413"] = "The body is too large"
        answers["415"] = "A content type the operation does not read"
    if r.quota is not None:
        answers["429"] = "Over the caller's byte-rate quota (Retry-After)"
    return answers


def openapi_document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    documented = [r for r in ROUTES if r.documented]
    for r in documented:
        operation: dict[str, Any] = {
            "tags": [r.tag],
            "summary": r.summary,
            "operationId": r.handler.__name__,
            "parameters": list(r.parameters),
            "responses": {
                status: ({"description": text} if int(status) < 400 else
                         {"description": text, "content": {"application/problem+json": {
                             "schema": {"$ref": "#/components/schemas/Problem"}}}})
                for status, text in sorted({**refusals(r), **r.responses}.items())
            },
        }
        operation["security"] = [] if r.access == "public" else [{"bearer": []}]
        operation["x-logbroker-access"] = r.access
        if r.request_body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": r.request_body}}}
        paths.setdefault(r.path, {})[r.method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "LogBroker HTTP API", "version": "1"},
        "tags": [{"name": name, "description": text} for name, text in TAGS
                 if any(r.tag == name for r in documented)],
        "paths": paths,
        "components": {"schemas": {"Problem": PROBLEM_SCHEMA},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}},
    }
