"""One HTTP client per user for gRPC group subscriptions, which go through the node's own HTTP API.

Each group subscription holds one connection for its member's push stream and, now and then, one
more for a join, a commit or a leave. With one client for everyone, one user's subscriptions could
hold every connection of its pool and everyone else's joins waited until they timed out. Here a
user's client has ``streams_max`` connections of its own (the push streams their quota allows, at
most the node's gRPC subscription slots) plus ``SHORT_CALLS`` for the short calls: what one user
holds never delays another. A client lives while its user has a subscription, so the clients are
at most as many as the subscriptions, each bounded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

import aiohttp

SHORT_CALLS: Final = 4  # a user's joins, commits and leaves in flight at once, besides their push streams


@dataclasses.dataclass(slots=True)
class _Client:
    session: aiohttp.ClientSession
    holders: int = 0


class GroupClients:
    def __init__(self, new_session: Callable[[int], aiohttp.ClientSession], streams_max: int) -> None:
        """``new_session(connections)``: a client of that many connections to the node's listener;
        ``streams_max``: the node's gRPC subscription slots, the most a user's client is sized for."""
        self._new_session = new_session
        self._streams_max = streams_max
        self._by_user: dict[str, _Client] = {}

    def acquire(self, user: str, user_streams_max: int) -> aiohttp.ClientSession:
        """``user``'s client (``user_streams_max`` 0: no quota), held until ``release(user)``."""
        client = self._by_user.get(user)
        if client is None:
            streams = min(user_streams_max or self._streams_max, self._streams_max)
            client = self._by_user[user] = _Client(self._new_session(streams + SHORT_CALLS))
        client.holders += 1
        return client.session

    async def release(self, user: str) -> None:
        client = self._by_user[user]
        client.holders -= 1
        if client.holders == 0:
            del self._by_user[user]
            await client.session.close()

    def users(self) -> int:
        return len(self._by_user)

    async def close(self) -> None:
        clients, self._by_user = list(self._by_user.values()), {}
        for client in clients:
            await client.session.close()
