"""A real node for the client and CLI tests (one per module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.nodes import NodeProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("node"))) as process:
        yield process
