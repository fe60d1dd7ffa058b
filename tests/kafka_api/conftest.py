"""One node per module with auth on and the Kafka listener on a free port (a module that needs
other flags defines its own ``node``), its HTTP API and an admin's token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.nodes import NodeProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[NodeProcess]:
    name = request.module.__name__.rsplit(".", 1)[-1]
    with NodeProcess(str(tmp_path_factory.mktemp(name)), *AUTH_ARGS, "--kafka-port", "0") as process:
        yield process


@pytest.fixture(scope="module")
def http(node: NodeProcess) -> Http:
    return Http(node.url)


@pytest.fixture(scope="module")
def admin_token(http: Http) -> str:
    return login(http, ADMIN, ADMIN_PASSWORD)
