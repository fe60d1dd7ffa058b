"""The Kafka listener over TLS (``SASL_SSL``) on a node with a certificate: librdkafka checks the
node's certificate against the CA that signed it, logs in with SASL PLAIN, produces and consumes; a
client that speaks plaintext to it gets nowhere and the listener goes on serving."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from logbroker.certs import CA_CERT
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.kafka import read_values
from tests.support.nodes import NodeProcess, make_certs, tls_args

TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("node")), *AUTH_ARGS, *tls_args(certs), "--kafka-port", "0") as node:
        yield node


def sasl_ssl(node: NodeProcess, certs: Path, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": node.kafka_address, "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
            "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD, "ssl.ca.location": str(certs / CA_CERT),
            **extra}


def test_librdkafka_produces_and_consumes_over_sasl_ssl(node, certs):
    http = Http(node.url, tls=ssl.create_default_context(cafile=str(certs / CA_CERT)))
    token = login(http, ADMIN, ADMIN_PASSWORD)
    http.json("POST", "/v1/topics", 201, body={"name": "over-tls"}, headers=bearer(token))
    producer = Producer(sasl_ssl(node, certs))
    delivered: list[Any] = []
    for i in range(20):
        producer.produce("over-tls", value=b"secret-%d" % i, partition=0,
                         on_delivery=lambda err, msg: delivered.append(err or msg.offset()))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == list(range(20))
    consumer = Consumer(sasl_ssl(node, certs, **{"group.id": "tls-readers", "enable.auto.commit": False}))
    assert read_values(consumer, "over-tls", 0, 20, TIMEOUT_S) == [b"secret-%d" % i for i in range(20)]


def test_a_client_that_does_not_trust_the_ca_is_refused(node, certs, tmp_path):
    other = make_certs(str(tmp_path / "other"))  # another CA: the node's certificate is not signed by it
    admin = AdminClient(sasl_ssl(node, certs, **{"ssl.ca.location": str(other / CA_CERT)}))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_plaintext_against_the_tls_listener_is_closed_and_serving_goes_on(node, certs):
    host, _, port = node.kafka_address.rpartition(":")
    request = struct.pack(">hhih", 18, 0, 1, -1)  # ApiVersions v0, as a plaintext client opens
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        try:
            answer = sock.recv(64)
        except (ConnectionResetError, TimeoutError):
            answer = b""
        assert answer == b"" or answer[0] == 0x15, answer  # closed, or a TLS alert record: never a Kafka answer
    assert list(AdminClient(sasl_ssl(node, certs)).list_topics(timeout=TIMEOUT_S).brokers) == [1]
