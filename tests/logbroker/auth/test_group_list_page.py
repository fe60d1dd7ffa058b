"""``GroupAccess.visible_page``: a user's page of the group list holds only groups they may
describe, in name order, and one call looks at a bounded number of names however few of them
the user sees (a short or empty page then carries a sealed cursor to go on from, which shows no
name of a group the user may not see and is refused by another process)."""

from __future__ import annotations

import pytest

from coordinator.local import LocalCoordinator
from coordinator.models import NodeInfo
from coordinator.users import UserRecord
from logbroker.auth import groups as groups_module
from logbroker.auth.groups import GroupAccess
from logbroker.auth.permissions import Principal
from logbroker.errors import InvalidRequestError
from logbroker.groups.names import SortedNames

NODE = NodeInfo(1, "http://127.0.0.1:1", "127.0.0.1:2")


class CountingNames:
    """The names index, counting how many names the pages took from it."""

    def __init__(self, names: list[str]) -> None:
        self.index = SortedNames()
        for name in names:
            self.index.add(name)
        self.taken = 0

    def __call__(self, cursor: str | None, count: int) -> tuple[list[str], bool]:
        names, more = self.index.after(cursor, count)
        self.taken += len(names)
        return names, more


@pytest.mark.asyncio
async def test_a_page_looks_at_a_bounded_number_of_names(tmp_path, monkeypatch):
    monkeypatch.setattr(groups_module, "LIST_SCAN_NAMES_MAX", 10)
    monkeypatch.setattr(groups_module, "LIST_SCAN_STEP", 4)
    coordinator = LocalCoordinator(str(tmp_path), NODE)
    await coordinator.start()
    for user in ("alice", "bob"):
        await coordinator.create_user(UserRecord(user, "user", "hash", 0))
    names = [f"g{i:02d}" for i in range(30)]
    mine = {"g03", "g15", "g16", "g29"}
    for name in names:
        await coordinator.claim_group(name, "bob" if name in mine else "alice")
    await coordinator.set_group_acl("g20", "bob", frozenset({"read"}))
    access = GroupAccess(coordinator, enabled=True)
    bob = Principal("bob", "user")
    source = CountingNames(names)
    pages, cursors, after = [], [], None
    for _ in range(10):
        before = source.taken
        page, cursor = await access.visible_page(bob, source, after, 2)
        assert source.taken - before <= 10, "at most LIST_SCAN_NAMES_MAX names a call"
        pages.append(page)
        if cursor is None:
            break
        cursors.append(cursor)
        after = access.unseal(cursor) if cursor.startswith("~") else cursor
    assert [n for p in pages for n in p] == ["g03", "g15", "g16", "g20", "g29"]
    assert any(len(p) < 2 for p in pages[:-1]), "a sparse stretch gives a short page"
    sealed = [c for c in cursors if c.startswith("~")]
    assert sealed and all(c in ("g16",) for c in cursors if not c.startswith("~")), cursors
    assert len({len(c) for c in sealed}) == 1, "a sealed cursor's length says nothing of the name"
    assert access.seal("g09") != access.seal("g09"), "a fresh nonce each time"
    for bad in ("~", "~abc", "~" + "A" * 400, sealed[0][:-2], sealed[0] + "x"):
        with pytest.raises(InvalidRequestError):
            access.unseal(bad)
    with pytest.raises(InvalidRequestError):
        GroupAccess(coordinator, enabled=True).unseal(sealed[0])
    admin = Principal("root", "admin")
    assert await access.visible_page(admin, CountingNames(names), "g27", 2) == (["g28", "g29"], None)
    assert await access.visible_page(admin, CountingNames(names), None, 2) == (["g00", "g01"], "g01")
    assert await GroupAccess(coordinator, enabled=False).visible_page(bob, CountingNames(names), "g28", 1) \
        == (["g29"], None)
