"""Peers remember a node that went silent only for the run that went silent."""

from __future__ import annotations

import asyncio
import socket
from typing import cast

from coordinator.base import Coordinator
from coordinator.models import NodeInfo
from internal_rpc.messages import PingRequest
from logbroker.errors import NoLeaderError
from logbroker.peers import Peers


class OneNode:
    """The one thing Peers asks of a coordinator: a node's addresses."""

    def __init__(self, info: NodeInfo) -> None:
        self.info = info

    def cached_node(self, node_id: int) -> NodeInfo | None:
        return self.info if node_id == self.info.node_id else None


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_node_that_registers_again_is_not_held_silent_for_its_last_run() -> None:
    address = f"127.0.0.1:{closed_port()}"
    coordinator = OneNode(NodeInfo(3, "http://127.0.0.1:1", address, started_ms=1_000))
    peers = Peers(cast(Coordinator, coordinator), tls=None, cluster_token=None)

    async def run() -> None:
        try:
            try:
                await peers.call(3, PingRequest(), deadline_s=1.0)
            except NoLeaderError:
                pass
            else:
                raise AssertionError("a closed port answered")
            assert peers.unreachable(3)
            assert peers.unreachable(3)  # still the same run: still silent
            coordinator.info = NodeInfo(3, "http://127.0.0.1:1", address, started_ms=2_000)
            assert not peers.unreachable(3)
        finally:
            await peers.close()

    asyncio.run(run())
