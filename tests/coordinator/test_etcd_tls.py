"""The etcd coordinator against a real etcd serving TLS with ``--client-cert-auth`` (DESIGN §5,
decisions 0225 and 0226): with the client certificate it works; a client without one, or without
TLS, is refused by etcd; a user record written straight into etcd by a client holding valid etcd
credentials but not the cluster's secret is not a user to the coordinator; a half-configured TLS
set is refused before anything connects."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
import pytest_asyncio
from aetcd import rpc

from coordinator.errors import CoordinatorError, CoordinatorUnavailableError
from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import EtcdAccess, EtcdClient, op_put, parse_etcd_url
from coordinator.etcd_keys import PartitionRecord, encode
from coordinator.models import NodeInfo, TopicMetadata
from coordinator.users import UserRecord
from logbroker.auth.passwords import hash_password
from tests.support.etcd import EtcdServer, running_etcd

SECRET = "a-cluster-token-for-the-seal-tests"
TTL_MS = 2_000
_clusters = itertools.count()


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    root = tmp_path_factory.mktemp("tls-etcd")
    with running_etcd(str(root / "etcd"), certs_dir=str(root / "certs")) as server:
        yield server


def access(server: EtcdServer) -> EtcdAccess:
    assert server.certs is not None
    return EtcdAccess(server.certs["ca"], server.certs["client_cert"], server.certs["client_key"])


@pytest_asyncio.fixture(loop_scope="function")
async def coordinator(tls_etcd: EtcdServer) -> AsyncIterator[EtcdCoordinator]:
    made = EtcdCoordinator.from_url(tls_etcd.url, f"tls{next(_clusters)}-{time.monotonic_ns()}",
                                    NodeInfo(1, "http://n1", "n1:1"), TTL_MS, access=access(tls_etcd),
                                    seal_secret=SECRET)
    await made.start()
    yield made
    await made.close()


@pytest.mark.asyncio
async def test_a_node_with_the_client_certificate_works_over_tls(tls_etcd, coordinator):
    assert tls_etcd.url.startswith("etcds://")
    await coordinator.create_user(UserRecord("alice", "user", "h", 1))
    assert (await coordinator.find_user("alice")) is not None
    assert [n.node_id for n in await coordinator.nodes()] == [1]


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["no client certificate", "no TLS"])
async def test_a_client_without_a_certificate_is_refused_by_etcd(tls_etcd, how):
    assert tls_etcd.certs is not None
    if how == "no TLS":
        channel = grpc.aio.insecure_channel(tls_etcd.endpoint)
    else:
        with open(tls_etcd.certs["ca"], "rb") as f:
            channel = grpc.aio.secure_channel(tls_etcd.endpoint, grpc.ssl_channel_credentials(f.read()))
    try:
        with pytest.raises(grpc.aio.AioRpcError):
            await rpc.KVStub(channel).Range(rpc.RangeRequest(key=b"/logbroker/", range_end=b"/logbroker0"),
                                            timeout=3.0)
    finally:
        await channel.close()


@pytest.mark.asyncio
async def test_a_coordinator_without_tls_cannot_start_against_it(tls_etcd):
    plain = EtcdCoordinator(parse_etcd_url(f"etcd://{tls_etcd.endpoint}"), "plain", NodeInfo(1, "", ""), TTL_MS)
    with pytest.raises(CoordinatorUnavailableError):
        await plain.start()


@pytest.mark.asyncio
async def test_an_admin_written_straight_into_etcd_is_no_user(tls_etcd, coordinator):
    """A client with valid etcd credentials but not the cluster's secret writes an admin user (and
    copies a real admin's sealed record under its own name): the coordinator sees neither."""
    await coordinator.create_user(UserRecord("root", "admin", hash_password("root-password-1"), 1))
    prefix = coordinator._prefix
    client = EtcdClient([tls_etcd.endpoint], access=access(tls_etcd))
    try:
        forged = UserRecord("mallory", "admin", hash_password("mallory-password"), 2)
        _, kvs = await client.range_prefix(f"{prefix}users/root".encode())
        copied = bytes(kvs[0].value).replace(b'"name":"root"', b'"name":"eve"')
        before = coordinator.rejected_records
        resp = await client.txn([], [op_put(f"{prefix}users/mallory".encode(), encode(forged.to_json())),
                                     op_put(f"{prefix}users/eve".encode(), copied)])
        await coordinator._feed.visible(int(resp.header.revision))  # type: ignore[union-attr]
    finally:
        await client.close()
    assert await coordinator.find_user("mallory") is None and await coordinator.find_user("eve") is None
    assert [u.name for u in await coordinator.list_users()] == ["root"]
    assert coordinator.rejected_records == before + 2
    # The name stays usable: a node's own create replaces the record it cannot verify.
    await coordinator.create_user(UserRecord("mallory", "user", "h", 3))
    found = await coordinator.find_user("mallory")
    assert found is not None and found.role == "user"


@pytest.mark.parametrize("files", [("ca",), ("ca", "cert"), ("cert", "key"), ("key",)])
def test_a_half_configured_tls_set_is_refused(tmp_path, files):
    given = {name: os.path.join(tmp_path, name) for name in files}
    with pytest.raises(CoordinatorError, match="half configured"):
        EtcdAccess(given.get("ca", ""), given.get("cert", ""), given.get("key", ""))


def test_etcds_needs_the_files_and_a_user_needs_tls(tls_etcd):
    with pytest.raises(CoordinatorError, match="asks for TLS"):
        EtcdAccess.for_url("etcds://127.0.0.1:2379")
    with pytest.raises(CoordinatorError, match="needs TLS"):
        EtcdAccess.for_url("etcd://127.0.0.1:2379", user="node", password="p")
    files = access(tls_etcd)
    assert EtcdAccess.for_url(f"etcd://{tls_etcd.endpoint}", files.ca_file, files.cert_file, files.key_file).tls


@pytest.mark.asyncio
async def test_records_from_before_seals_stop_a_start_until_a_node_adopts_them(tls_etcd):
    """A user and a topic stored before seals: a node refuses to start over such topics (it would
    drop their data as unknown), one node adopts them, and every node then sees both."""
    cluster = f"adopt-{time.monotonic_ns()}"
    prefix = f"/logbroker/{cluster}/"
    old_topic = TopicMetadata("old-topic", "tid", 1, 1, "topic", {}, "old-admin", 1)
    client = EtcdClient([tls_etcd.endpoint], access=access(tls_etcd))
    try:
        await client.txn([], [
            op_put(f"{prefix}users/old-admin".encode(), encode(UserRecord("old-admin", "admin", "h", 1).to_json())),
            op_put(f"{prefix}topics/old-topic".encode(), encode(old_topic.to_json())),
            op_put(f"{prefix}partitions/old-topic/0".encode(), PartitionRecord("tid", (1,), (1,), 0).encode())])
    finally:
        await client.close()

    def coordinator(node_id: int, adopt: bool) -> EtcdCoordinator:
        return EtcdCoordinator.from_url(tls_etcd.url, cluster, NodeInfo(node_id, "", ""), TTL_MS,
                                        access=access(tls_etcd), seal_secret=SECRET, adopt_unsealed=adopt)

    with pytest.raises(CoordinatorError, match="--etcd-adopt-unsealed true"):
        await coordinator(1, False).start()
    made = [coordinator(2, True), coordinator(3, False)]
    try:
        for started in made:
            await started.start()
            assert (await started.find_user("old-admin")) is not None
            assert (await started.get_topic("old-topic")).owner == "old-admin"
    finally:
        for started in made:
            await started.close()


async def enable_etcd_auth(server: EtcdServer, user: str, password: str) -> None:
    """etcd's own auth on: ``root`` (required), and ``user`` with read-write on /logbroker/ only."""
    assert server.certs is not None
    with open(server.certs["ca"], "rb") as ca, open(server.certs["client_key"], "rb") as key, \
            open(server.certs["client_cert"], "rb") as cert:
        credentials = grpc.ssl_channel_credentials(ca.read(), key.read(), cert.read())
    async with grpc.aio.secure_channel(server.endpoint, credentials) as channel:
        auth = rpc.AuthStub(channel)
        await auth.RoleAdd(rpc.AuthRoleAddRequest(name="root"))
        await auth.UserAdd(rpc.AuthUserAddRequest(name="root", password="root-password-for-etcd"))
        await auth.UserGrantRole(rpc.AuthUserGrantRoleRequest(user="root", role="root"))
        await auth.RoleAdd(rpc.AuthRoleAddRequest(name="logbroker"))
        await auth.RoleGrantPermission(rpc.AuthRoleGrantPermissionRequest(
            name="logbroker", perm=rpc.Permission(permType=2, key=b"/logbroker/", range_end=b"/logbroker0")))
        await auth.UserAdd(rpc.AuthUserAddRequest(name=user, password=password))
        await auth.UserGrantRole(rpc.AuthUserGrantRoleRequest(user=user, role="logbroker"))
        await auth.AuthEnable(rpc.AuthEnableRequest())


@pytest.mark.asyncio
async def test_etcd_user_auth_over_tls(tmp_path):
    """With etcd's user auth on, a node with the user and password works; a wrong password is
    refused by etcd."""
    with running_etcd(str(tmp_path / "etcd"), certs_dir=str(tmp_path / "certs")) as server:
        await enable_etcd_auth(server, "lb-node", "lb-node-password")
        files = access(server)
        good = EtcdAccess(files.ca_file, files.cert_file, files.key_file, "lb-node", "lb-node-password")
        coordinator = EtcdCoordinator.from_url(server.url, "authed", NodeInfo(1, "", ""), TTL_MS, access=good,
                                               seal_secret=SECRET)
        await coordinator.start()
        try:
            await coordinator.create_user(UserRecord("alice", "user", "h", 1))
            assert (await coordinator.find_user("alice")) is not None
        finally:
            await coordinator.close()
        bad = EtcdAccess(files.ca_file, files.cert_file, files.key_file, "lb-node", "wrong-password")
        refused = EtcdCoordinator.from_url(server.url, "authed", NodeInfo(2, "", ""), TTL_MS, access=bad,
                                           seal_secret=SECRET)
        with pytest.raises(CoordinatorUnavailableError):
            await refused.start()
