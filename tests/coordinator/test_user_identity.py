"""Users' immutable ids and credential versions (decision 0174): stored with each user, defaulted
for users stored before them (stable until the next change saves them), new for a new user."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from coordinator.local import STATE_FILE, LocalCoordinator
from coordinator.models import NodeInfo
from coordinator.users import UserRecord, legacy_user_id

NODE = NodeInfo(1, "http://127.0.0.1:1", "127.0.0.1:2")
OLD_USER = {"name": "old", "role": "user", "password_hash": "scrypt$x", "created_ms": 1700000000000, "quotas": {}}


async def _started(path: str) -> LocalCoordinator:
    coordinator = LocalCoordinator(path, NODE)
    await coordinator.start()
    return coordinator


@pytest.mark.asyncio
async def test_users_stored_without_an_id_get_a_stable_one_saved_with_their_next_change(tmp_path):
    with open(os.path.join(tmp_path, STATE_FILE), "w") as f:
        json.dump({"version": 2, "topics": {}, "users": {"old": OLD_USER}, "acls": {}}, f)
    first = await _started(str(tmp_path))
    user = await first.find_user("old")
    assert user is not None and user.credential_version == 0
    assert user.user_id == legacy_user_id("old", OLD_USER["created_ms"])
    again = await (await _started(str(tmp_path))).find_user("old")
    assert again == user, "the default id is the same after a restart"
    await first.update_user(user.with_new_credentials())
    with open(os.path.join(tmp_path, STATE_FILE)) as f:
        saved = json.load(f)["users"]["old"]
    assert saved["user_id"] == user.user_id and saved["credential_version"] == 1


@pytest.mark.asyncio
async def test_a_name_created_again_is_a_new_user_id(tmp_path):
    coordinator = await _started(str(tmp_path))
    first = UserRecord("bob", "user", "scrypt$x", 1)
    await coordinator.create_user(first)
    await coordinator.delete_user("bob")
    second = UserRecord("bob", "user", "scrypt$x", 1)
    await coordinator.create_user(second)
    assert first.user_id != second.user_id
    stored = await (await _started(str(tmp_path))).find_user("bob")
    assert stored == second


def test_new_credentials_keep_the_id_and_raise_the_version():
    user = UserRecord("carol", "admin", "scrypt$a", 5, {"connections_max": 3})
    changed = user.with_new_credentials("scrypt$b")
    assert changed == dataclasses.replace(user, password_hash="scrypt$b", credential_version=1)
    assert user.with_new_credentials().password_hash == "scrypt$a"
    assert UserRecord.from_json(changed.to_json()) == changed
