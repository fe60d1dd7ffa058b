"""The login throttle behind shared addresses, against a real node (decision 0238): failures are
keyed by username and (username, address), never by address alone, so one person's failures
behind a proxy or NAT do not lock out the others there; behind a trusted proxy the address is the
client's from ``X-Forwarded-For``, which nobody else can claim."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

PASSWORD = "a-password-of-a-user"
PROXY = "127.0.0.3"
FAILURES = 40


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("addresses")), *AUTH_ARGS, "--trusted-proxies",
                     f"{PROXY}/32") as process:
        yield process


@pytest.fixture(scope="module")
def admin(node: NodeProcess) -> Http:
    http = Http(node.url)
    token = login(http, ADMIN, ADMIN_PASSWORD)
    for name in ("carol", "erin", "frank"):
        http.json("POST", "/v1/users", 201, body={"username": name, "password": PASSWORD}, headers=bearer(token))
    return http


def _login(http: Http, user: str, password: str, forwarded_for: str | None = None) -> int:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else None
    return http.call("POST", "/v1/auth/token", body={"username": user, "password": password}, headers=headers).status


def test_failures_from_one_address_do_not_lock_out_a_first_login_from_it(node, admin):
    shared = Http(node.url, source="127.0.0.2")
    statuses = [_login(shared, f"guess{i}" if i % 2 else "mallory", f"wrong-{i:04d}") for i in range(FAILURES)]
    assert set(statuses) <= {401, 429}, statuses
    assert statuses.count(401) > 22, "the address was locked: 22 failures from one address used to lock it"
    # The guessed name backs off: its last counted failure blocked it for a while that the guesses
    # since may have outlasted, but a failure now blocks it again at once (a longer block each time).
    assert 429 in (_login(shared, "mallory", "wrong-again"), _login(shared, "mallory", "wrong-again-2")), \
        "the guessed name backs off"
    assert _login(shared, "carol", PASSWORD) == 200, "someone else behind the same address logs in"


def test_behind_a_trusted_proxy_each_client_has_its_own_address(node, admin):
    proxy = Http(node.url, source=PROXY)
    assert _login(proxy, "erin", PASSWORD, forwarded_for="198.51.100.8") == 200  # erin's usual place
    for i in range(10):  # another client of the same proxy guesses erin's password
        assert _login(proxy, "erin", f"wrong-{i:04d}", forwarded_for="6.6.6.6, 198.51.100.7") in (401, 429)
    assert _login(proxy, "erin", PASSWORD, forwarded_for="198.51.100.7") == 429, "the guesser's pair is blocked"
    assert _login(proxy, "erin", PASSWORD, forwarded_for="198.51.100.8") == 200, "erin's own pair is not"


def test_forwarded_for_from_an_untrusted_peer_is_ignored(node, admin):
    home = Http(node.url, source="127.0.0.5")
    assert _login(home, "frank", PASSWORD) == 200
    forger = Http(node.url, source="127.0.0.6")
    for i in range(10):  # claims to be frank's address: its failures must not land on frank's pair
        assert _login(forger, "frank", f"wrong-{i:04d}", forwarded_for="127.0.0.5") in (401, 429)
    assert _login(forger, "frank", PASSWORD, forwarded_for="127.0.0.5") == 429
    assert _login(home, "frank", PASSWORD) == 200, "frank's own pair was not touched by the forger"
