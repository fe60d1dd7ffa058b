"""The node's internal RPC behind mutual TLS and the cluster token: a client with the cluster's
certificate and token reads from the node; without the certificate, with one from another CA,
in plaintext, or without the token, it is refused."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
from collections.abc import Iterator

import pytest

from internal_rpc.client import RpcClient
from internal_rpc.errors import RpcCallError, Status
from internal_rpc.messages import (
    VERSION,
    FetchAnswer,
    FetchRequest,
    PingAnswer,
    PingRequest,
    Request,
    decode,
    method_of,
)
from internal_rpc.security import TlsFiles
from internal_rpc.server import read_frame, write_frame
from tests.conftest import ROOT
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

TOKEN = "cluster-token-for-tests"
SERVICE = "logbroker.Node"


def make_certs(out) -> None:
    result = subprocess.run([sys.executable, "-m", "logbroker", "certs", "--out", str(out), "--nodes", "1,2"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    cluster, other = tmp_path_factory.mktemp("cluster-ca"), tmp_path_factory.mktemp("other-ca")
    make_certs(cluster)
    make_certs(other)
    return cluster, other


@pytest.fixture(scope="module")
def node(tmp_path_factory, certs) -> Iterator[NodeProcess]:
    cluster, _ = certs
    with NodeProcess(str(tmp_path_factory.mktemp("rpc-node")), *AUTH_ARGS,
                     "--rpc-tls-ca-file", str(cluster / "ca.pem"), "--rpc-tls-cert-file", str(cluster / "node-1.pem"),
                     "--rpc-tls-key-file", str(cluster / "node-1.key"), "--cluster-token", TOKEN) as process:
        yield process


@pytest.fixture(scope="module")
def rpc_address(node) -> str:
    http = Http(node.url)
    token = login(http, ADMIN, ADMIN_PASSWORD)
    http.json("POST", "/v1/topics", 201, body={"name": "rpc.t"}, headers=bearer(token))
    http.json("POST", "/v1/topics/rpc.t/records", body={"records": [{"value": "hello", "partition": 0}]},
              headers=bearer(token))
    (me,) = http.json("GET", "/v1/cluster", headers=bearer(token))["nodes"]
    assert me["rpc_address"].startswith("127.0.0.1:")
    return str(me["rpc_address"])


def call(address: str, request: Request | tuple[str, object], *, tls: TlsFiles | None, token: str | None):
    """A typed request's typed answer; or, for ``(method, body)``, the answer's map."""
    async def run():
        async with RpcClient(address, tls=tls, cluster_token=token, deadline_s=5) as client:
            if isinstance(request, tuple):
                return await client.call(SERVICE, *request)
            method = method_of(request)
            return decode(method.answer, await client.call(SERVICE, method.name, request))

    return asyncio.run(run())


def fetch(offset: int = 0, topic: str = "rpc.t", max_bytes: int = 65536) -> FetchRequest:
    return FetchRequest(topic=topic, partition=0, offset=offset, max_bytes=max_bytes)


def files(directory, name: str = "node-2") -> TlsFiles:
    return TlsFiles(str(directory / "ca.pem"), str(directory / f"{name}.pem"), str(directory / f"{name}.key"))


def test_cluster_certificate_and_token_read_from_the_node(certs, rpc_address):
    cluster, _ = certs
    assert call(rpc_address, PingRequest(), tls=files(cluster), token=TOKEN) == PingAnswer(node_id=1)
    fetched = call(rpc_address, fetch(), tls=files(cluster), token=TOKEN)
    assert fetched.next_offset == 1 and fetched.high_watermark == 1 and b"hello" in fetched.data
    for body in ({"v": VERSION, "topic": "rpc.t", "partition": "0", "offset": 0, "max_bytes": 1},
                 {"v": VERSION, "topic": "rpc.t", "offset": 0, "max_bytes": 1},
                 {"v": VERSION + 1, "topic": "rpc.t", "partition": 0, "offset": 0, "max_bytes": 1}):
        with pytest.raises(RpcCallError) as bad:
            call(rpc_address, ("Fetch", body), tls=files(cluster), token=TOKEN)
        assert bad.value.code == "invalid_request" and bad.value.answered and not bad.value.retriable
    with pytest.raises(RpcCallError) as unknown:
        call(rpc_address, fetch(topic="nope", max_bytes=1), tls=files(cluster), token=TOKEN)
    assert unknown.value.code == "unknown_topic"


def stream_calls(address: str, method: str, requests: list, *, tls: TlsFiles, token: str | None) -> list:
    """Each request in turn over one stream; an answer or the error it raised, per request."""
    async def run():
        async with RpcClient(address, tls=tls, cluster_token=token, deadline_s=5) as client:
            stream = client.stream(SERVICE, method)
            out: list = []
            for request in requests:
                try:
                    out.append(await stream.call(request, deadline_s=5))
                except RpcCallError as exc:
                    out.append(exc)
            return out, stream.closed

    return asyncio.run(run())


def test_a_stream_answers_each_request_in_turn_and_outlives_a_handlers_error(certs, rpc_address):
    cluster, _ = certs
    answers, closed = stream_calls(rpc_address, "Fetch", [
        fetch(), fetch(topic="nope", max_bytes=1),
        {"v": VERSION, "topic": "rpc.t", "partition": "0", "offset": 0, "max_bytes": 1},
        {"v": VERSION + 1, "topic": "rpc.t", "partition": 0, "offset": 0, "max_bytes": 1},
        fetch(offset=1)], tls=files(cluster), token=TOKEN)
    assert b"hello" in decode(FetchAnswer, answers[0]).data
    assert isinstance(answers[1], RpcCallError) and answers[1].code == "unknown_topic" and answers[1].answered
    for malformed in answers[2:4]:
        assert isinstance(malformed, RpcCallError) and malformed.code == "invalid_request" and not malformed.retriable
    assert decode(FetchAnswer, answers[4]) == FetchAnswer(data=b"", first_offset=1, next_offset=1, high_watermark=1)
    assert not closed
    refused, closed = stream_calls(rpc_address, "Ping", [PingRequest(), PingRequest()], tls=files(cluster),
                                   token="wrong-token")
    assert all(isinstance(r, RpcCallError) and not r.answered for r in refused) and closed


def test_wrong_or_missing_token_is_refused(certs, rpc_address):
    cluster, _ = certs
    for token in (None, "wrong-token", ""):
        with pytest.raises(RpcCallError) as refused:
            call(rpc_address, PingRequest(), tls=files(cluster), token=token)
        assert refused.value.status == Status.UNAUTHENTICATED


def test_clients_without_the_cluster_certificate_are_refused(certs, rpc_address, tmp_path):
    cluster, other = certs
    with pytest.raises(RpcCallError) as other_ca:
        call(rpc_address, PingRequest(), tls=files(other), token=TOKEN)
    assert other_ca.value.status == Status.UNAVAILABLE
    mixed = TlsFiles(str(cluster / "ca.pem"), str(other / "node-2.pem"), str(other / "node-2.key"))
    with pytest.raises(RpcCallError) as foreign_cert:
        call(rpc_address, PingRequest(), tls=mixed, token=TOKEN)
    assert foreign_cert.value.status == Status.UNAVAILABLE
    with pytest.raises(RpcCallError) as plaintext:
        call(rpc_address, PingRequest(), tls=None, token=TOKEN)
    assert plaintext.value.status == Status.UNAVAILABLE

    async def server_auth_only():
        context = ssl.create_default_context(cadata=(cluster / "ca.pem").read_text())
        host, port = rpc_address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
        try:
            write_frame(writer, {"hello": 1, "token": TOKEN})
            await writer.drain()
            return await asyncio.wait_for(read_frame(reader), 5)
        finally:
            writer.close()

    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        asyncio.run(server_auth_only())


def test_rpc_security_rules(tmp_path):
    from logbroker.config import NodeConfig
    from logbroker.errors import InvalidRequestError
    from logbroker.rpc_service import rpc_security

    tls = {"rpc_tls_ca_file": "ca", "rpc_tls_cert_file": "c", "rpc_tls_key_file": "k"}
    assert rpc_security(NodeConfig(auth="off"))[0] is True
    assert rpc_security(NodeConfig(auth="on")) == (False, None, None)
    with pytest.raises(InvalidRequestError, match="mutual TLS"):
        rpc_security(NodeConfig(auth="on", coordinator="etcd://127.0.0.1:2379", jwt_secret="s" * 32))
    with pytest.raises(InvalidRequestError, match="cluster_token"):
        rpc_security(NodeConfig(auth="on", **tls))
    serve, files_, token = rpc_security(NodeConfig(auth="on", cluster_token="t", **tls))
    assert serve and files_ == TlsFiles("ca", "c", "k") and token == "t"
    with pytest.raises(InvalidRequestError, match="go together"):
        NodeConfig(rpc_tls_ca_file="ca")
