"""One real node per module and the plain HTTP helper, shared with the HTTP API tests."""

from tests.http_api.conftest import http, node

__all__ = ["http", "node"]
