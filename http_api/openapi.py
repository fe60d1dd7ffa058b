"""The OpenAPI 3 document, generated from the route table (``http_api.routing.ROUTES``)."""

from __future__ import annotations

from typing import Any

from http_api.routing import ROUTES

PROBLEM_SCHEMA = {"type": "object", "properties": {
    "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
    "detail": {"type": "string"}, "code": {"type": "string"}, "retriable": {"type": "boolean"}}}


def openapi_document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for r in ROUTES:
        if not r.documented:
            continue
        operation: dict[str, Any] = {
            "summary": r.summary,
            "operationId": r.handler.__name__,
            "parameters": list(r.parameters),
            "responses": {
                status: ({"description": text} if int(status) < 400 else
                         {"description": text, "content": {"application/problem+json": {
                             "schema": {"$ref": "#/components/schemas/Problem"}}}})
                for status, text in r.responses.items()
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
        "paths": paths,
        "components": {"schemas": {"Problem": PROBLEM_SCHEMA},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}},
    }
