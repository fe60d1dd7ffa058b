"""The embedded coordinator's count of the groups each user owns (the per-user groups limit reads
it on every new group) agrees with a count of every record, through claims, deletions, user
deletions with and without an heir, failed saves and restarts; and the ``Coordinator`` default
(for implementations without a count) counts the same."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.base import Coordinator
from coordinator.errors import UnknownUserError, UserExistsError
from coordinator.group_journal import GroupJournal
from coordinator.local import LocalCoordinator
from coordinator.models import NodeInfo
from coordinator.users import UserRecord

NODE = NodeInfo(1, "http://127.0.0.1:1", "127.0.0.1:2")
USERS = ("alice", "bob", "carol")
GROUPS = ("g0", "g1", "g2", "g3", "g4")
T = TypeVar("T")


def _no_fsync(_fd: int) -> None:
    return None


class OwnerCounts(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = tempfile.mkdtemp(prefix="owner-counts-")
        self.coordinator = self.open()

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(call)

    def open(self) -> LocalCoordinator:
        coordinator = LocalCoordinator(self.dir, NODE)
        coordinator._journal = GroupJournal(self.dir, fsync=_no_fsync)  # a test's tmp dir needs no fsync
        self.run(coordinator.start())
        return coordinator

    def teardown(self) -> None:
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(user=st.sampled_from(USERS))
    def create_user(self, user: str) -> None:
        with contextlib.suppress(UserExistsError):
            self.run(self.coordinator.create_user(UserRecord(user, "user", "hash", 0)))

    @rule(group=st.sampled_from(GROUPS), owner=st.sampled_from((*USERS, None)))
    def claim(self, group: str, owner: str | None) -> None:
        before = self.run(self.coordinator.get_group(group))
        record = self.run(self.coordinator.claim_group(group, owner))
        assert record.owner == (owner if before is None else before.owner)

    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group: str) -> None:
        self.run(self.coordinator.delete_group(group))

    @rule(user=st.sampled_from(USERS), heir=st.sampled_from((*USERS, None)))
    def delete_user(self, user: str, heir: str | None) -> None:
        owned = {r.name for r in self.run(self.coordinator.list_group_records()) if r.owner == user}
        inherits = heir if heir is not None and heir != user and self.run(self.coordinator.find_user(heir)) else None
        try:
            self.run(self.coordinator.delete_user(user, reassign_to=heir))
        except UnknownUserError:
            return
        for name in owned:
            record = self.run(self.coordinator.get_group(name))
            assert record is not None and record.owner == inherits, (name, record, inherits)

    @rule(group=st.sampled_from(GROUPS), owner=st.sampled_from(USERS))
    def failed_save(self, group: str, owner: str) -> None:
        """A claim whose journal append fails changes neither the records nor the counts."""
        journal = self.coordinator._journal

        def fail(*_args: object) -> None:
            raise OSError("disk gone")

        self.coordinator._journal = type("Failing", (), {"write": staticmethod(fail)})()  # type: ignore[assignment]
        try:
            self.run(self.coordinator.claim_group(group, owner))
        except OSError:
            pass
        finally:
            self.coordinator._journal = journal

    @rule()
    def restart(self) -> None:
        self.coordinator = self.open()

    @invariant()
    def counts_agree(self) -> None:
        records = self.run(self.coordinator.list_group_records())
        for user in USERS:
            brute = sum(1 for r in records if r.owner == user)
            assert self.run(self.coordinator.count_groups_owned(user)) == brute, user
            assert self.run(Coordinator.count_groups_owned(self.coordinator, user)) == brute, "the default"


TestOwnerCounts = OwnerCounts.TestCase
TestOwnerCounts.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


@pytest.mark.asyncio
async def test_a_user_deleted_without_an_heir_owns_nothing_and_a_new_user_of_that_name_starts_at_zero(tmp_path):
    coordinator = LocalCoordinator(str(tmp_path), NODE)
    await coordinator.start()
    await coordinator.create_user(UserRecord("alice", "user", "hash", 0))
    for i in range(3):
        await coordinator.claim_group(f"g{i}", "alice")
    assert await coordinator.count_groups_owned("alice") == 3
    await coordinator.delete_user("alice")
    await coordinator.create_user(UserRecord("alice", "user", "hash", 1))
    assert await coordinator.count_groups_owned("alice") == 0
    assert all(r.owner is None for r in await coordinator.list_group_records())
    assert os.path.exists(tmp_path / "groups.jsonl")
