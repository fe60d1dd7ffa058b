"""``GroupChannels`` alone: each user's channels to a node are their own, each carries at most its
share of calls (the next opens another), and a channel closes with the last call on it."""

from __future__ import annotations

import asyncio
import contextlib

from grpc_api.group_channels import GroupChannels


class FakeChannel:
    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_each_user_has_channels_of_their_own_each_with_a_bounded_share_of_calls():
    async def scenario() -> None:
        opened: list[FakeChannel] = []

        def open_channel(address: str) -> FakeChannel:
            opened.append(FakeChannel(address))
            return opened[-1]

        channels = GroupChannels(open_channel, calls_per_channel=2)
        async with contextlib.AsyncExitStack() as alice_calls:
            first = await alice_calls.enter_async_context(channels.channel("alice", "node-2:9092"))
            second = await alice_calls.enter_async_context(channels.channel("alice", "node-2:9092"))
            third = await alice_calls.enter_async_context(channels.channel("alice", "node-2:9092"))
            assert first is second and third is not first and channels.channels() == 2
            async with channels.channel("bob", "node-2:9092") as bob, channels.channel("alice", "node-3:9092") as far:
                assert bob not in (first, third) and far.address == "node-3:9092" and channels.channels() == 4
            assert bob.closed and far.closed and not first.closed and channels.channels() == 2
        assert all(channel.closed for channel in opened) and channels.channels() == 0

    asyncio.run(scenario())


def test_a_channel_with_room_is_used_again_before_another_is_opened():
    async def scenario() -> None:
        opened: list[FakeChannel] = []

        def open_channel(address: str) -> FakeChannel:
            opened.append(FakeChannel(address))
            return opened[-1]

        channels = GroupChannels(open_channel, calls_per_channel=2)
        async with channels.channel("alice", "n:1") as a, channels.channel("alice", "n:1"):
            async with channels.channel("alice", "n:1") as b:
                assert b is not a
            async with channels.channel("alice", "n:1") as c:  # b closed with its call: a new one
                assert c is not a and c is not b
        assert len(opened) == 3 and channels.channels() == 0
        async with channels.channel("alice", "n:1"):
            await channels.close()
        assert all(channel.closed for channel in opened)

    asyncio.run(scenario())
