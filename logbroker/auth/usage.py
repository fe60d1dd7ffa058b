"""What each user holds against their holding limits (``QuotaLimits``: topics, partitions, open
streams, waiting long-polls, groups, group members), so one user cannot take a node-wide resource
from the others.

Owned resources (topics, partitions, groups) are counted by the caller from the coordinator; the
checks here only compare. Streams and long-polls live in this process, so they are counted here,
taken with ``hold`` and given back when its block ends (however it ends). Admins hold without
limit. A refusal is ``TooManyRequestsError`` (429 ``too_many_requests``) naming the limit and its
value, raised before anything is created.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, Literal

from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.errors import TooManyRequestsError

Held = Literal["streams", "long_polls"]
RETRY_AFTER_S: Final = 1.0
NOUNS: Final = {"topics_max": "topics and queues", "partitions_max": "partitions", "streams_max": "open streams",
                "long_polls_max": "waiting long-polls", "groups_max": "consumer groups",
                "group_members_max": "group members"}


def check_limit(principal: Principal, limits: QuotaLimits, limit: str, held: int, more: int = 1) -> None:
    """Refuse when ``principal`` holding ``held`` would go past ``limits.<limit>`` by taking ``more``."""
    value = getattr(limits, limit)
    if principal.is_admin or value <= 0 or held + more <= value:
        return
    raise TooManyRequestsError(f"{principal.name!r} holds {held} {NOUNS[limit]}; the limit {limit} is {value}",
                               retry_after_s=RETRY_AFTER_S, limit=limit, limit_value=value)


def check_group_limit(principal: Principal, limits: QuotaLimits, groups_owned: int) -> None:
    """Before ``principal`` creates a consumer group, with the number of groups they own now."""
    check_limit(principal, limits, "groups_max", groups_owned)


def check_member_limit(principal: Principal, limits: QuotaLimits, members_held: int) -> None:
    """Before ``principal`` joins a group as a new member, with the members they hold now (all groups)."""
    check_limit(principal, limits, "group_members_max", members_held)


class Usage:
    """Streams and long-polls held per user, and one lock per user for check-then-create (so two
    concurrent creates cannot both pass a check that only one of them fits)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, Held], int] = {}
        self._locks: dict[str, list[Any]] = {}

    def held(self, user: str, kind: Held) -> int:
        return self._held.get((user, kind), 0)

    @contextmanager
    def hold(self, principal: Principal, limits: QuotaLimits, kind: Held) -> Iterator[None]:
        key = (principal.name, kind)
        check_limit(principal, limits, f"{kind}_max", self._held.get(key, 0))
        self._held[key] = self._held.get(key, 0) + 1
        try:
            yield
        finally:
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]

    @asynccontextmanager
    async def creating(self, user: str) -> AsyncIterator[None]:
        """Held by ``user`` from counting what they own to creating more. A lock lives while
        someone holds or waits for it, so the table is as large as the creates in flight."""
        entry = self._locks.setdefault(user, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if not entry[1]:
                del self._locks[user]
