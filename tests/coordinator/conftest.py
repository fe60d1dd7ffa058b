"""A real etcd for the coordinator tests: one per module (tests use distinct cluster names, so
they do not see each other's keys), and a fresh one for tests that kill or restart it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.etcd import EtcdServer, running_etcd


@pytest.fixture(scope="module")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    with running_etcd(str(tmp_path_factory.mktemp("etcd"))) as server:
        yield server


@pytest.fixture
def own_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """An etcd this test alone uses (it may kill and restart it)."""
    with running_etcd(str(tmp_path_factory.mktemp("own-etcd"))) as server:
        yield server
