"""One node with auth on per module, its gRPC address, and tokens for an admin and a user."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

USER, USER_PASSWORD = "grpc-user", "grpc-user-password"
ACCESS_RECHECK_MS = 300


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    # Access is checked again on open streams every 300 ms (5 s by default), so revocation tests are quick.
    with NodeProcess(str(tmp_path_factory.mktemp("grpc-node")), *AUTH_ARGS, "--access-recheck-ms",
                     str(ACCESS_RECHECK_MS)) as process:
        yield process


@pytest.fixture(scope="module")
def http(node) -> Http:
    return Http(node.url)


@pytest.fixture(scope="module")
def admin_token(http) -> str:
    return login(http, ADMIN, ADMIN_PASSWORD)


@pytest.fixture(scope="module")
def user_token(http, admin_token) -> str:
    http.json("POST", "/v1/users", 201, body={"username": USER, "password": USER_PASSWORD},
              headers=bearer(admin_token))
    return login(http, USER, USER_PASSWORD)


def auth(token: str) -> tuple[tuple[str, Any], ...]:
    return (("authorization", f"Bearer {token}"),)
