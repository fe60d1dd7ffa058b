"""``GroupClients`` alone: one client per user, sized to the user's stream quota (at most the node's
slots) plus the short calls, shared by that user's subscriptions and closed with the last of them."""

from __future__ import annotations

import asyncio
from typing import Any

from grpc_api.group_clients import SHORT_CALLS, GroupClients


class FakeSession:
    def __init__(self, connections: int) -> None:
        self.connections = connections
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_each_user_has_a_client_of_their_own_closed_with_their_last_subscription():
    async def scenario() -> None:
        made: list[Any] = []

        def new_session(connections: int) -> Any:
            made.append(FakeSession(connections))
            return made[-1]

        clients = GroupClients(new_session, streams_max=50)
        alice = clients.acquire("alice", 10)
        assert clients.acquire("alice", 10) is alice and alice.connections == 10 + SHORT_CALLS
        bob = clients.acquire("bob", 0)  # no stream quota: the node's slots
        assert bob is not alice and bob.connections == 50 + SHORT_CALLS
        assert clients.acquire("carol", 500).connections == 50 + SHORT_CALLS
        await clients.release("alice")
        assert not alice.closed
        await clients.release("alice")
        assert alice.closed and clients.users() == 2
        await clients.release("bob")
        assert bob.closed and clients.users() == 1
        await clients.close()
        assert all(session.closed for session in made) and clients.users() == 0

    asyncio.run(scenario())
