"""A Kafka session logged in with a token lasts as long as the token (KIP-368): SaslAuthenticate
says how long, a client re-authenticates on the same connection before then, a connection that
does not is closed at its next request, and re-authentication cannot change the user."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.http_api.conftest import Http
from tests.kafka_api.test_listener import closed, encode_body, raw_connection, send_request
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

TOKEN_TTL_S = 5
OTHER, OTHER_PASSWORD = "reauth-other", "reauth-other-password"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("reauth")), *AUTH_ARGS, "--kafka-port", "0",
                     "--token-ttl-s", str(TOKEN_TTL_S)) as process:
        yield process


@pytest.fixture(scope="module")
def http(node: NodeProcess) -> Http:
    return Http(node.url)


def bearer_login(sock: socket.socket, token: str) -> Any:
    send_request(sock, 17, 1, encode_body(17, 1, {"mechanism": "OAUTHBEARER"}))
    message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
    return send_request(sock, 36, 2, encode_body(36, 2, {"auth_bytes": message}))


def metadata(sock: socket.socket) -> Any:
    return send_request(sock, 3, 12, encode_body(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False}))


def test_a_token_session_says_its_lifetime_and_ends_with_the_token(node, http):
    with raw_connection(node) as sock:
        answer = bearer_login(sock, login(http, ADMIN, ADMIN_PASSWORD))
        assert answer.error_code.value == 0
        assert 0 < answer.session_lifetime.total_seconds() <= TOKEN_TTL_S
        assert metadata(sock).brokers  # served while the token stands
        time.sleep(answer.session_lifetime.total_seconds() + 1.5)  # JWT expiry counts whole seconds
        with pytest.raises(OSError):  # not re-authenticated: the next request closes the connection
            metadata(sock)


def test_re_authentication_extends_the_session_and_must_name_the_same_user(node, http):
    http.json("POST", "/v1/users", 201, body={"username": OTHER, "password": OTHER_PASSWORD},
              headers=bearer(login(http, ADMIN, ADMIN_PASSWORD)))
    with raw_connection(node) as sock:
        first = bearer_login(sock, login(http, ADMIN, ADMIN_PASSWORD))
        first_ends = time.monotonic() + first.session_lifetime.total_seconds()
        time.sleep(first.session_lifetime.total_seconds() / 2)
        again = bearer_login(sock, login(http, ADMIN, ADMIN_PASSWORD))  # a fresh token, the same connection
        assert again.error_code.value == 0
        assert time.monotonic() + again.session_lifetime.total_seconds() > first_ends + 1
        time.sleep(max(0.0, first_ends + 0.5 - time.monotonic()))  # past the first token's end, not the second's
        assert metadata(sock).brokers
    with raw_connection(node) as sock:
        assert bearer_login(sock, login(http, ADMIN, ADMIN_PASSWORD)).error_code.value == 0
        switched = bearer_login(sock, login(http, OTHER, OTHER_PASSWORD))
        assert switched.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
        assert closed(sock)


def test_librdkafka_re_authenticates_and_keeps_producing_past_its_first_token(node, http):
    http.json("POST", "/v1/topics", 201, body={"name": "reauth-topic"},
              headers=bearer(login(http, ADMIN, ADMIN_PASSWORD)))
    refreshed: list[float] = []

    def token(_config: str) -> tuple[str, float]:
        refreshed.append(time.time())
        return login(http, ADMIN, ADMIN_PASSWORD), time.time() + TOKEN_TTL_S

    producer = Producer({"bootstrap.servers": node.kafka_address, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": token, "linger.ms": 0})
    failed: list[Any] = []
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < TOKEN_TTL_S * 2 + 1:  # past two tokens' lifetimes on one producer
        producer.produce("reauth-topic", b"r%d" % sent, partition=0,
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
        sent += 1
        producer.poll(0.05)
        time.sleep(0.05)
    assert producer.flush(20) == 0 and failed == []
    assert len(refreshed) >= 2
    topic = http.json("GET", "/v1/topics/reauth-topic", headers=bearer(login(http, ADMIN, ADMIN_PASSWORD)))
    assert topic["partitions"][0]["latest_offset"] == sent
