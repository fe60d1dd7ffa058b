"""The addresses of the cluster's other nodes, for the listener's per-address shares (decision 0235).

A node passes group and queue calls on to the node that serves them (``http_api.pass_on``), so
one peer's address carries many clients' connections; it must not be held to one client's share.
Every ``REFRESH_S`` the live nodes' advertised HTTP hosts are resolved (each lookup bounded by
``RESOLVE_TIMEOUT_S``; a host that does not resolve is left out until it does) and the guard's
exempt share keys replaced. A node whose connections leave from another address than the one it
advertises is not recognised: list that address in ``trusted_proxies``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import urllib.parse
from typing import Final

from coordinator.errors import CoordinatorError
from http_api.listener import ConnectionGuard
from logbroker.node import Node
from logbroker.proxies import parse_address, share_key

log = logging.getLogger(__name__)
REFRESH_S: Final = 10.0
RESOLVE_TIMEOUT_S: Final = 2.0


async def watch_peers(node: Node, guard: ConnectionGuard) -> None:
    """Keep ``guard.exempt`` the share keys of the other live nodes, until cancelled."""
    while True:
        try:
            guard.exempt = await peer_share_keys(node)
        except CoordinatorError as exc:  # the previous addresses stand until the next refresh
            log.warning("cluster nodes not listed", extra={"fields": {"error": str(exc)}})
        await asyncio.sleep(REFRESH_S)


async def peer_share_keys(node: Node) -> frozenset[str]:
    hosts = {urllib.parse.urlsplit(info.http_url).hostname for info in await node.coordinator.nodes()
             if info.node_id != node.config.node_id}
    keys: set[str] = set()
    loop = asyncio.get_running_loop()
    for host in sorted(h for h in hosts if h):
        if parse_address(host) is not None:
            keys.add(share_key(host))
            continue
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_S):
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError) as exc:
            log.debug("peer host not resolved", extra={"fields": {"host": host, "error": str(exc)}})
            continue
        keys.update(share_key(str(info[4][0])) for info in infos)
    return frozenset(keys)
