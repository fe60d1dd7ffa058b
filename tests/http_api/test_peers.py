"""The other nodes' addresses the listener exempts from per-address shares (``http_api.peers``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from coordinator.models import NodeInfo
from http_api.peers import peer_share_keys


class _Coordinator:
    async def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(1, "http://10.1.1.1:8080", "10.1.1.1:9090"),
                NodeInfo(2, "https://10.1.1.2:8080", "10.1.1.2:9090"),
                NodeInfo(3, "http://[2001:db8::3]:8080", "[2001:db8::3]:9090"),
                NodeInfo(4, "http://localhost:8080", "localhost:9090"),
                NodeInfo(5, "http://no-such-host.invalid:8080", "no-such-host.invalid:9090")]


def test_other_nodes_hosts_are_resolved_to_share_keys_and_this_node_is_left_out():
    node = SimpleNamespace(coordinator=_Coordinator(), config=SimpleNamespace(node_id=1))
    keys = asyncio.run(peer_share_keys(node))  # type: ignore[arg-type]
    assert "10.1.1.1" not in keys
    assert {"10.1.1.2", "2001:db8::/64", "127.0.0.1"} <= keys
    assert all("invalid" not in key for key in keys)
