"""What every cluster test module shares: the admin's bearer header on the module's ``cluster``."""

from __future__ import annotations

import pytest

from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import Cluster


@pytest.fixture(scope="module")
def token(cluster: Cluster) -> dict[str, str]:
    return bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
