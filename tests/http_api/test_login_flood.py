"""A flood of wrong-password logins against a real node: real logins still succeed, the guesses
are refused before hashing once a username has failed a few times or too many attempts from one
address are in flight, and guessing stays slow afterwards (decisions 0180, 0238)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest

from logbroker.auth.login_throttle import FREE_FAILURES, IN_FLIGHT_MAX
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

WRONG = 150
REAL = 8
PASSWORD = "password-of-the-victim"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("flood")), *AUTH_ARGS) as process:
        yield process


async def _login(session: aiohttp.ClientSession, url: str, user: str, password: str) -> tuple[int, str | None]:
    async with session.post(url + "/v1/auth/token", json={"username": user, "password": password}) as reply:
        await reply.read()
        return reply.status, reply.headers.get("Retry-After")


async def _flood(url: str) -> tuple[list[tuple[int, str | None]], list[tuple[int, str | None]]]:
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        wrong = [asyncio.create_task(_login(session, url, "victim" if i % 3 else f"nobody{i}", f"guess-{i:08d}"))
                 for i in range(WRONG)]
        await asyncio.sleep(0)
        real = [asyncio.create_task(_login(session, url, ADMIN, ADMIN_PASSWORD)) for _ in range(REAL)]
        return list(await asyncio.gather(*wrong)), list(await asyncio.gather(*real))


def test_real_logins_succeed_during_a_flood_of_wrong_passwords(http: Http, node: NodeProcess):
    admin = login(http, ADMIN, ADMIN_PASSWORD)  # admin has logged in from this address before
    http.json("POST", "/v1/users", 201, body={"username": "victim", "password": PASSWORD}, headers=bearer(admin))
    wrong, real = asyncio.run(_flood(node.url))
    assert [status for status, _ in real] == [200] * REAL, real
    statuses = [status for status, _ in wrong]
    assert set(statuses) <= {401, 429}, statuses
    at_victim = [status for i, status in enumerate(statuses) if i % 3]
    checked = at_victim.count(401)
    bound = FREE_FAILURES["user"] + IN_FLIGHT_MAX["user"]
    assert 0 < checked <= bound, f"{checked} of {len(at_victim)} guesses at one name had their password checked"
    sprayed = statuses.count(401) - checked
    assert sprayed < (WRONG - len(at_victim)) // 2, f"{sprayed} guesses at other names were checked at once"
    assert all(retry is not None and int(retry) >= 1 for status, retry in wrong if status == 429)
    # afterwards guesses at that name are mostly refused before hashing, with the time to wait
    replies = [http.call("POST", "/v1/auth/token", body={"username": "victim", "password": f"again-{i:04d}"})
               for i in range(30)]
    assert sum(r.status == 401 for r in replies) <= 3, [r.status for r in replies]
    refused = [r for r in replies if r.status == 429]
    assert refused and all(r.json()["code"] == "too_many_requests" for r in refused)
    assert "too many failed logins" in refused[-1].json()["detail"] and int(refused[-1].headers["retry-after"]) >= 1
    assert http.call("POST", "/v1/auth/token", body={"username": ADMIN, "password": ADMIN_PASSWORD}).status == 200
    # an admin's work that hashes passwords is not starved either
    http.json("POST", "/v1/users", 201, body={"username": "later", "password": PASSWORD}, headers=bearer(admin))
