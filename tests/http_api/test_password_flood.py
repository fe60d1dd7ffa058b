"""A flood of password changes against a real node (decision 0236): users changing their own
passwords hold at most one hashing thread between them, so a login sent while dozens of changes
wait is answered before nearly all of them, where it used to queue behind every one."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import aiohttp
import pytest

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

USERS = 16
CHANGES_EACH = 2
PASSWORD = "a-password-of-a-user"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("changes")), *AUTH_ARGS) as process:
        yield process


def _waiting(text: str, lane: str) -> float:
    match = re.search(rf'^logbroker_password_hashes_waiting{{lane="{lane}"}} (\S+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else -1.0


async def _flood(url: str, tokens: dict[str, str], admin_token: str) -> tuple[int, int, list[int]]:
    """Every user changes their password twice at once; once most changes wait, another user logs
    in. Returns the login's status, how many changes had ended before it, and the changes' statuses."""
    ended: list[int] = []
    timeout = aiohttp.ClientTimeout(total=WAIT_S)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        async def change(user: str, i: int) -> int:
            body = {"password": f"new-password-{i}", "current_password": PASSWORD}
            async with session.put(f"{url}/v1/users/{user}/password", json=body,
                                   headers=bearer(tokens[user])) as reply:
                ended.append(reply.status)
                return reply.status

        changes = [asyncio.create_task(change(user, i)) for user in tokens for i in range(CHANGES_EACH)]
        deadline = time.monotonic() + WAIT_S
        while True:  # until the node holds most of the changes waiting for a hashing thread
            async with session.get(f"{url}/metrics", headers=bearer(admin_token)) as reply:
                waiting = _waiting(await reply.text(), "own")
            if waiting >= len(changes) // 2 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        assert waiting >= len(changes) // 2, f"only {waiting} changes were waiting"
        async with session.post(f"{url}/v1/auth/token", json={"username": "bystander", "password": PASSWORD}) as reply:
            await reply.read()
            status, before = reply.status, len(ended)
        return status, before, list(await asyncio.gather(*changes))


def test_a_login_is_answered_ahead_of_a_flood_of_password_changes(node):
    http = Http(node.url)
    admin_token = login(http, ADMIN, ADMIN_PASSWORD)
    tokens = {}
    for name in [f"changer{i}" for i in range(USERS)] + ["bystander"]:
        http.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD},
                  headers=bearer(admin_token))
        tokens[name] = login(http, name, PASSWORD)
    del tokens["bystander"]
    status, before, statuses = asyncio.run(_flood(node.url, tokens, admin_token))
    assert status == 200
    assert set(statuses) <= {204, 403, 429}, statuses  # 403: a second change raced the first
    done = statuses.count(204)
    assert done >= len(statuses) // 2, statuses
    assert before <= len(statuses) // 4, f"the login waited for {before} of {len(statuses)} password changes"


def test_concurrent_changes_of_one_account_past_its_budget_get_429_before_hashing(node):
    from logbroker.auth.password_changes import BURST

    http = Http(node.url)
    admin_token = login(http, ADMIN, ADMIN_PASSWORD)
    http.json("POST", "/v1/users", 201, body={"username": "hasty", "password": PASSWORD}, headers=bearer(admin_token))
    token = login(http, "hasty", PASSWORD)

    async def burst() -> list[tuple[int, str | None]]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                         timeout=aiohttp.ClientTimeout(total=WAIT_S)) as session:
            async def change(i: int) -> tuple[int, str | None]:
                body = {"password": f"hasty-password-{i}", "current_password": PASSWORD}
                async with session.put(f"{node.url}/v1/users/hasty/password", json=body,
                                       headers=bearer(token)) as reply:
                    return reply.status, reply.headers.get("Retry-After")
            return list(await asyncio.gather(*(change(i) for i in range(40))))

    replies = asyncio.run(burst())
    statuses = [status for status, _ in replies]
    assert set(statuses) <= {204, 403, 429, 401}, statuses  # 401: sent after a change revoked the token
    assert statuses.count(204) + statuses.count(403) <= BURST, statuses
    refused = [retry for status, retry in replies if status == 429]
    assert len(refused) >= len(replies) - BURST - statuses.count(401), statuses
    assert all(retry is not None and 1 <= int(retry) <= 60 for retry in refused)
