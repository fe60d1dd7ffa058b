"""The Python client and the CLI with credentials, against a real node with auth on."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from logbroker.client import Client, LogBrokerError, Producer
from logbroker.client.sync import SyncClient
from segments.batch import encode_values
from tests.conftest import ROOT
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS
from tests.support.fake_node import closed_port_url
from tests.support.nodes import NodeProcess

TIMEOUT_S = 60
REFRESH_DEADLINE_S = 15.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("auth-client")), *AUTH_ARGS, "--token-ttl-s", "3") as process:
        yield process


def cli(node: NodeProcess, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOGBROKER_")}
    return subprocess.run([sys.executable, "-m", "logbroker", *args], input=stdin, capture_output=True, text=True,
                          env={**clean, "PYTHONPATH": ROOT, "LOGBROKER_URL": node.url, **env}, cwd=ROOT,
                          timeout=TIMEOUT_S)


@pytest.mark.asyncio
async def test_client_logs_in_refreshes_and_recovers_from_a_refused_token(node):
    async with Client(node.url, username=ADMIN, password=ADMIN_PASSWORD) as client:
        await client.create_topic("client.auth", partitions=2)
        first = client._credentials._token
        assert first
        deadline = time.monotonic() + REFRESH_DEADLINE_S
        while client._credentials._token == first and time.monotonic() < deadline:
            await client.list_topics()
            await asyncio.sleep(0.1)
        assert client._credentials._token != first, "renewed before its 3 s lifetime ran out"
        client._credentials._token = "refused.by.node"
        client._credentials._expires_at = float("inf")
        assert [t["name"] for t in await client.list_topics()] == ["client.auth"]
        async with Producer(client, linger_ms=1) as producer:
            meta = await producer.send_and_wait("client.auth", b"v", partition=1)
        assert meta.partition == 1
    async with Client(node.url) as anonymous:
        with pytest.raises(LogBrokerError) as refused:
            await anonymous.list_topics()
        assert refused.value.status == 401
    async with Client(node.url, token="not-a-token") as fixed:
        with pytest.raises(LogBrokerError):
            await fixed.list_topics()
    with pytest.raises(ValueError):
        Client(node.url, username=ADMIN)


def test_client_reads_credentials_from_the_environment(node, monkeypatch):
    monkeypatch.setenv("LOGBROKER_USER", ADMIN)
    monkeypatch.setenv("LOGBROKER_PASSWORD", ADMIN_PASSWORD)
    with SyncClient(node.url) as client:
        assert "client.auth" in [t["name"] for t in client.list_topics()]


def test_cli_token_takes_the_credentials_its_help_names(node):
    from_env = cli(node, "token", LOGBROKER_USER=ADMIN, LOGBROKER_PASSWORD=ADMIN_PASSWORD)
    assert from_env.returncode == 0, from_env.stderr
    assert cli(node, "topic", "list", "--token", from_env.stdout.strip()).returncode == 0
    mixed = cli(node, "token", "--user", ADMIN, LOGBROKER_PASSWORD=ADMIN_PASSWORD)
    assert mixed.returncode == 0 and mixed.stdout.count(".") == 2, mixed.stderr
    no_password = cli(node, "token", LOGBROKER_USER=ADMIN)
    assert no_password.returncode == 1
    assert "--password" in no_password.stderr and "--user" not in no_password.stderr.split("(")[0]
    wrong = cli(node, "token", LOGBROKER_USER=ADMIN, LOGBROKER_PASSWORD="not-the-password")
    assert wrong.returncode == 1 and "401" in wrong.stderr
    listed = cli(node, "topic", "list", "--password", ADMIN_PASSWORD, LOGBROKER_USER=ADMIN)
    assert listed.returncode == 0, listed.stderr
    lone = cli(node, "topic", "list", "--user", ADMIN)
    assert lone.returncode == 1 and "Traceback" not in lone.stderr and "--password" in lone.stderr


def test_cli_users_grants_and_tokens(node):
    admin = {"LOGBROKER_USER": ADMIN, "LOGBROKER_PASSWORD": ADMIN_PASSWORD}
    created = cli(node, "user", "create", "cli.kim", stdin="kim-password\n", **admin)
    assert created.returncode == 0 and "created user cli.kim" in created.stdout, created.stderr
    assert cli(node, "topic", "list").returncode == 1, "no credentials: refused"
    kim = ("--user", "cli.kim", "--password", "kim-password")
    assert cli(node, "topic", "create", "kim.t", *kim).returncode == 0
    token = cli(node, "token", *kim)
    assert token.returncode == 0 and token.stdout.count(".") == 2
    assert cli(node, "produce", "kim.t", "--token", token.stdout.strip(), stdin="a\nb\n").returncode == 0
    assert cli(node, "user", "create", "cli.lee", "--new-password", "lee-password", **admin).returncode == 0
    lee = {"LOGBROKER_USER": "cli.lee", "LOGBROKER_PASSWORD": "lee-password"}
    refused = cli(node, "consume", "kim.t", "--from-beginning", **lee)
    assert refused.returncode == 1 and "403" in refused.stderr
    granted = cli(node, "acl", "set", "kim.t", "cli.lee", "read", *kim)
    assert granted.returncode == 0 and "cli.lee: read" in granted.stdout
    consumed = cli(node, "consume", "kim.t", "--from-beginning", **lee)
    assert consumed.returncode == 0 and consumed.stdout.splitlines() == ["a", "b"]
    owned = cli(node, "user", "topics", "cli.kim", *kim)
    assert "owns: kim.t" in owned.stdout
    assert cli(node, "user", "delete", "cli.kim", **admin).returncode == 1
    moved = cli(node, "user", "delete", "cli.kim", "--reassign-to", "cli.lee", **admin)
    assert moved.returncode == 0 and "now owned by cli.lee" in moved.stdout
    assert "cli.kim" not in cli(node, "user", "list", **admin).stdout
    both = cli(node, "topic", "list", "--token", "x", "--user", "a", "--password", "b")
    assert both.returncode == 1 and "not both" in both.stderr


def test_cli_group_grants(node):
    admin = {"LOGBROKER_USER": ADMIN, "LOGBROKER_PASSWORD": ADMIN_PASSWORD}
    for name in ("cli.gown", "cli.gother"):
        assert cli(node, "user", "create", name, "--new-password", f"{name}-password", **admin).returncode == 0
    owner = {"LOGBROKER_USER": "cli.gown", "LOGBROKER_PASSWORD": "cli.gown-password"}
    other = {"LOGBROKER_USER": "cli.gother", "LOGBROKER_PASSWORD": "cli.gother-password"}
    assert cli(node, "topic", "create", "gown.t", **owner).returncode == 0
    with SyncClient(node.url, username="cli.gown", password="cli.gown-password") as client:
        member = client.join_group("gown.g", ["gown.t"])
        assert client.get_group_acl("gown.g") == {"group": "gown.g", "owner": "cli.gown", "acl": []}
        client.leave_group("gown.g", member["member_id"])
    assert "gown.g" not in cli(node, "group", "list", **other).stdout
    granted = cli(node, "group", "acl-set", "gown.g", "cli.gother", "read", **owner)
    assert granted.returncode == 0 and granted.stdout.splitlines() == ["gown.g owned by cli.gown",
                                                                       "  cli.gother: read"]
    assert "gown.g" in cli(node, "group", "list", **other).stdout
    assert cli(node, "group", "delete", "gown.g", **other).returncode == 1
    assert cli(node, "group", "acl-set", "gown.g", "cli.gother", **owner).returncode == 0
    assert "gown.g" not in cli(node, "group", "list", **other).stdout
    assert cli(node, "group", "delete", "gown.g", **owner).returncode == 0


@pytest.mark.asyncio
async def test_client_logs_in_through_the_first_bootstrap_url_that_answers(node):
    dead = closed_port_url()
    async with Client([dead, node.url], username=ADMIN, password=ADMIN_PASSWORD) as client:
        await client.create_topic("client.auth.boot", partitions=1)
        assert await client.produce_batch("client.auth.boot", 0, encode_values([b"v"])) == 0
        assert await client.list_offset("client.auth.boot", 0) == 1


def test_cli_and_client_change_a_password_with_the_current_one(node):
    admin = {"LOGBROKER_USER": ADMIN, "LOGBROKER_PASSWORD": ADMIN_PASSWORD}
    assert cli(node, "user", "create", "cli.pam", "--new-password", "pam-password-1", **admin).returncode == 0
    pam = ("--user", "cli.pam", "--password", "pam-password-1")
    changed = cli(node, "user", "passwd", "cli.pam", "--new-password", "pam-password-2", *pam)
    assert changed.returncode == 0, changed.stderr  # the login password is the current one
    token = cli(node, "token", "--user", "cli.pam", "--password", "pam-password-2").stdout.strip()
    alone = cli(node, "user", "passwd", "cli.pam", "--new-password", "pam-password-3", "--token", token)
    assert alone.returncode == 1 and "current_password" in alone.stderr, "a token alone is not enough"
    wrong = cli(node, "user", "passwd", "cli.pam", "--new-password", "pam-password-3", "--token", token,
                "--current-password", "not-pams-password")
    assert wrong.returncode == 1 and "403" in wrong.stderr
    reset = cli(node, "user", "passwd", "cli.pam", "--new-password", "pam-password-4", **admin)
    assert reset.returncode == 0, reset.stderr  # an admin's reset of another user

    async def own_change() -> None:
        async with Client(node.url, username="cli.pam", password="pam-password-4") as client:
            await client.change_password("cli.pam", "pam-password-5", current_password="pam-password-4")

    asyncio.run(own_change())
    assert cli(node, "token", "--user", "cli.pam", "--password", "pam-password-5").returncode == 0
