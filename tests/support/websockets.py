"""WebSocket upgrades in tests (produce and subscribe streams): the status a node answers one with."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.support.auth import bearer

TIMEOUT_S = 30


def upgrade_status(url: str, path: str, token: str | None) -> int:
    """101 when the node takes the upgrade of ``path`` (the socket is closed at once), else the
    status it refused it with."""
    async def run() -> int:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session:
            try:
                async with session.ws_connect(url + path, headers=bearer(token) if token else None):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status
    return asyncio.run(run())
