"""A token stands only for the user it was issued to, at the credential version it was issued at
(decision 0174); tokens from before ids existed stand, through an upgrade, for the unchanged
users stored before ids existed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from coordinator.local import LocalCoordinator
from coordinator.models import NodeInfo
from coordinator.users import UserRecord, legacy_user_id
from logbroker.auth.keys import KeyRing
from logbroker.auth.quotas import QuotaLimits
from logbroker.auth.service import AuthService
from logbroker.auth.tokens import Tokens
from logbroker.errors import AuthenticationError

SECRET = "s" * 40
CREATED_MS = 1_700_000_000_000


@pytest.fixture
def service(tmp_path) -> Iterator[AuthService]:
    coordinator = LocalCoordinator(str(tmp_path), NodeInfo(1, "", ""))
    auth = AuthService(coordinator, lambda: Tokens(KeyRing.from_secret(SECRET, "k"), ttl_s=600), QuotaLimits())
    auth.start()
    yield auth
    auth.close()


def _tokens(auth: AuthService) -> Tokens:
    assert auth.tokens is not None
    return auth.tokens


@pytest.mark.asyncio
async def test_a_token_stands_for_its_user_id_and_version_only(service):
    user = UserRecord("ann", "user", "h", CREATED_MS)
    await service.coordinator.create_user(user)
    tokens = _tokens(service)
    token, _ = tokens.issue("ann", ("user",), user_id=user.user_id, credential_version=0)
    assert (await service.current_user(tokens.verify(token))).name == "ann"
    await service.revoke_tokens("ann")
    with pytest.raises(AuthenticationError, match="revoked"):
        await service.current_user(tokens.verify(token))
    unversioned, _ = tokens.issue("ann", ("user",))
    with pytest.raises(AuthenticationError, match="earlier user"):
        await service.current_user(tokens.verify(unversioned))


@pytest.mark.asyncio
async def test_tokens_from_before_ids_stand_for_unchanged_users_from_before_ids(service):
    legacy = UserRecord("old", "user", "h", CREATED_MS, user_id=legacy_user_id("old", CREATED_MS))
    await service.coordinator.create_user(legacy)
    tokens = _tokens(service)
    old_token, _ = tokens.issue("old", ("user",))  # as a node before the upgrade issued it
    claims = tokens.verify(old_token)
    assert (await service.current_user(claims)).name == "old"
    issued_before = dataclasses.replace(claims, issued_at=CREATED_MS // 1000 - 1)
    with pytest.raises(AuthenticationError, match="earlier user"):
        await service.current_user(issued_before)
    await service.revoke_tokens("old")
    with pytest.raises(AuthenticationError):
        await service.current_user(claims)
