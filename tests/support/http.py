"""The plain HTTP helper of the HTTP API tests, for tests in other folders."""

from tests.http_api.conftest import Http

__all__ = ["Http"]
