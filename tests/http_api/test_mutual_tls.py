"""Mutual TLS on the public listeners (``--tls-client-ca-file``): over HTTP and gRPC, a client
without a certificate, or with one from another CA, is refused at the handshake; one with a
certificate from the client CA still needs its token; the Python client and the CLI show theirs;
a gRPC group subscription (whose member calls the node makes to its own HTTP listener) works."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from http import client as httpclient
from pathlib import Path
from typing import Any

import grpc
import pytest

from logbroker.certs import generate, issue, load_or_create_ca
from logbroker.client import Client
from tests.conftest import ROOT
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS
from tests.support.grpc_calls import first_records, pb, pb_grpc
from tests.support.nodes import NodeProcess, tls_args


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mtls-certs")
    generate(str(out), [1])
    issue(str(out), "client", [], load_or_create_ca(str(out)))
    foreign = out / "foreign"
    generate(str(foreign), [])
    issue(str(foreign), "intruder", [], load_or_create_ca(str(foreign)))
    return out


@pytest.fixture(scope="module")
def node(tmp_path_factory, certs) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("mtls-node")), *AUTH_ARGS, *tls_args(certs),
                     "--tls-client-ca-file", str(certs / "ca.pem")) as process:
        yield process


def https(node: NodeProcess, certs: Path, client: str | None) -> httpclient.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if client is not None:
        context.load_cert_chain(str(certs / f"{client}.pem"), str(certs / f"{client}.key"))
    return httpclient.HTTPSConnection("127.0.0.1", int(node.url.rsplit(":", 1)[1]), context=context, timeout=30)


def login(connection: httpclient.HTTPSConnection) -> httpclient.HTTPResponse:
    connection.request("POST", "/v1/auth/token", body=json.dumps({"username": ADMIN, "password": ADMIN_PASSWORD}),
                       headers={"Content-Type": "application/json"})
    return connection.getresponse()


@pytest.mark.parametrize("client", [None, "foreign/intruder"])
def test_http_without_a_certificate_from_the_client_ca_is_refused_at_the_handshake(node, certs, client):
    connection = https(node, certs, client)
    with pytest.raises((ssl.SSLError, ConnectionError, httpclient.HTTPException)):
        login(connection).read()
    connection.close()


def test_http_with_a_client_certificate_still_needs_a_token(node, certs):
    connection = https(node, certs, "client")
    connection.request("GET", "/v1/topics")
    refused = connection.getresponse()
    assert refused.status == 401
    refused.read()
    answer = login(connection)
    assert answer.status == 200 and json.loads(answer.read())["token_type"] == "bearer"
    connection.close()


def grpc_channel(node: NodeProcess, certs: Path, client: str | None) -> grpc.aio.Channel:
    chain = key = None
    if client is not None:
        chain, key = (certs / f"{client}.pem").read_bytes(), (certs / f"{client}.key").read_bytes()
    credentials = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes(), private_key=key,
                                               certificate_chain=chain)
    return grpc.aio.secure_channel(node.grpc_address, credentials)


def python_client(node: NodeProcess, certs: Path, client: str = "client") -> Client:
    return Client(node.url, username=ADMIN, password=ADMIN_PASSWORD, ca_file=str(certs / "ca.pem"),
                  cert_file=str(certs / f"{client}.pem"), key_file=str(certs / f"{client}.key"), timeout_s=20)


def test_the_python_client_and_grpc_with_a_client_certificate_publish_and_subscribe(node, certs):
    async def run() -> tuple[list[int], list[Any], list[Any]]:
        async with python_client(node, certs) as client:
            await client.create_topic("mtls.orders", partitions=2)
            sent = await client.produce("mtls.orders", [{"value": "over https", "partition": 0}])
        connection = https(node, certs, "client")
        token = json.loads(login(connection).read())["access_token"]
        connection.close()
        metadata = (("authorization", f"Bearer {token}"),)
        async with grpc_channel(node, certs, "client") as channel:
            stub = pb_grpc.BrokerStub(channel)
            published = await stub.Publish(pb.PublishRequest(topic="mtls.orders", records=[
                pb.Record(value=b"over grpc", partition=0), pb.Record(value=b"second", partition=1)]),
                metadata=metadata, timeout=10)
            one = await first_records(stub.Subscribe(pb.SubscribeRequest(topic="mtls.orders", partition=0, offset=0),
                                              metadata=metadata, timeout=20), 2)
            grouped = await first_records(stub.Subscribe(pb.SubscribeRequest(topic="mtls.orders", group="mtls.readers"),
                                                  metadata=metadata, timeout=30), 3)
        return [r["offset"] for r in sent] + [p.offset for p in published.positions], one, grouped

    offsets, one, grouped = asyncio.run(run())
    assert offsets == [0, 1, 0]
    assert [r.value for r in one] == [b"over https", b"over grpc"]
    assert sorted(r.value for r in grouped) == [b"over grpc", b"over https", b"second"]


@pytest.mark.parametrize("client", [None, "foreign/intruder"])
def test_grpc_without_a_certificate_from_the_client_ca_is_refused(node, certs, client):
    async def run() -> None:
        async with grpc_channel(node, certs, client) as channel:
            await pb_grpc.BrokerStub(channel).Publish(pb.PublishRequest(topic="mtls.orders", records=[
                pb.Record(value=b"x")]), timeout=10)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(run())
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_the_cli_shows_its_certificate(node, certs):
    base = [sys.executable, "-m", "logbroker", "topic", "list", "--url", node.url, "--json", "--user", ADMIN,
            "--password", ADMIN_PASSWORD, "--ca-file", str(certs / "ca.pem")]
    listed = subprocess.run([*base, "--cert-file", str(certs / "client.pem"), "--key-file", str(certs / "client.key")],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "mtls.orders" in listed.stdout
    refused = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert refused.returncode != 0


def test_a_client_certificate_without_its_key_is_refused_by_the_client(certs):
    with pytest.raises(ValueError, match="go together"):
        Client("https://127.0.0.1:1", cert_file=str(certs / "client.pem"))
