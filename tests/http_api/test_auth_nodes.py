"""Auth settings that need nodes of their own: key rotation across restarts, asymmetric keys and
HMAC confusion over HTTP, quotas throttling and recovering, connection limits, HTTPS."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client as httpclient
import json
import ssl
import subprocess
import sys
import time

import jwt
import pytest

from tests.conftest import ROOT
from tests.http_api.conftest import Http
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, bearer, login
from tests.support.nodes import NodeProcess

POLL_DEADLINE_S = 20.0
ADMIN_ARGS = ("--auth", "on", "--admin-user", ADMIN, "--admin-password", ADMIN_PASSWORD)


def _write_keys(path, signing: str, keys: list[dict]) -> None:
    lines = [f'signing_kid = "{signing}"']
    for key in keys:
        lines.append("[[keys]]")
        lines.extend(f'{k} = "{v}"' for k, v in key.items())
    path.write_text("\n".join(lines) + "\n")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_key_rotation_across_restarts(tmp_path):
    keys = tmp_path / "keys.toml"
    k1 = {"kid": "k1", "alg": "HS256", "secret": "first-secret-of-at-least-thirty-two-bytes"}
    k2 = {"kid": "k2", "alg": "HS256", "secret": "second-secret-of-at-least-thirty-two-bytes"}
    data = str(tmp_path / "node")
    _write_keys(keys, "k1", [k1])
    with NodeProcess(data, *ADMIN_ARGS, "--jwt-keys-file", str(keys)) as node:
        old = login(Http(node.url), ADMIN, ADMIN_PASSWORD)
    assert jwt.get_unverified_header(old)["kid"] == "k1"
    _write_keys(keys, "k2", [k1, k2])
    with NodeProcess(data, *ADMIN_ARGS, "--jwt-keys-file", str(keys)) as node:
        http = Http(node.url)
        assert http.call("GET", "/v1/topics", headers=bearer(old)).status == 200, "old kid still accepted"
        new = login(http, ADMIN, ADMIN_PASSWORD)
        assert jwt.get_unverified_header(new)["kid"] == "k2"
    _write_keys(keys, "k2", [k2])
    with NodeProcess(data, *ADMIN_ARGS, "--jwt-keys-file", str(keys)) as node:
        http = Http(node.url)
        assert http.call("GET", "/v1/topics", headers=bearer(old)).status == 401, "removed kid refused"
        assert http.call("GET", "/v1/topics", headers=bearer(new)).status == 200


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_asymmetric_signing_and_hmac_confusion_over_http(tmp_path, alg):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048) if alg == "RS256" \
        else ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "jwt.pem").write_bytes(private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "jwt.pub.pem").write_bytes(public_pem)
    _write_keys(tmp_path / "keys.toml", "asym",
                [{"kid": "asym", "alg": alg, "private_key_file": "jwt.pem", "public_key_file": "jwt.pub.pem"}])
    with NodeProcess(str(tmp_path / "node"), *ADMIN_ARGS, "--jwt-keys-file", str(tmp_path / "keys.toml")) as node:
        http = Http(node.url)
        token = login(http, ADMIN, ADMIN_PASSWORD)
        assert jwt.get_unverified_header(token)["alg"] == alg
        assert http.call("GET", "/v1/topics", headers=bearer(token)).status == 200
        claims = jwt.decode(token, options={"verify_signature": False})
        signing_input = f"{_b64(json.dumps({'alg': 'HS256', 'kid': 'asym'}).encode())}." \
                        f"{_b64(json.dumps(claims).encode())}"
        forged = signing_input + "." + _b64(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())
        assert http.call("GET", "/v1/topics", headers=bearer(forged)).status == 401


def _poll_until_ok(call, deadline_s: float = POLL_DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while True:
        reply = call()
        if reply.status != 429 or time.monotonic() > deadline:
            return reply
        time.sleep(min(0.2, float(reply.headers.get("retry-after", "1"))))


def test_quotas_throttle_and_recover(tmp_path):
    with NodeProcess(str(tmp_path), *AUTH_ARGS, "--quota-produce-bytes-per-s", "20000",
                     "--quota-fetch-bytes-per-s", "20000") as node:
        http = Http(node.url)
        token = login(http, ADMIN, ADMIN_PASSWORD)
        http.json("POST", "/v1/topics", 201, body={"name": "q"}, headers=bearer(token))
        body = {"records": [{"value": "x" * 30000, "partition": 0}]}
        assert http.call("POST", "/v1/topics/q/records", body=body, headers=bearer(token)).status == 200
        throttled = http.call("POST", "/v1/topics/q/records", body=body, headers=bearer(token))
        assert throttled.status == 429 and throttled.json()["code"] == "too_many_requests"
        assert 1 <= int(throttled.headers["retry-after"]) <= 2
        assert throttled.json()["retriable"] is True
        latest = http.json("GET", "/v1/topics/q/partitions/0/offsets?at=latest", headers=bearer(token))
        assert latest["offset"] == 1, "a throttled produce writes nothing"
        again = _poll_until_ok(lambda: http.call("POST", "/v1/topics/q/records", body=body, headers=bearer(token)))
        assert again.status == 200 and again.json()["offsets"] == [{"partition": 0, "offset": 1}]
        fetch = "/v1/topics/q/partitions/0/records?offset=0"
        assert http.call("GET", fetch, headers=bearer(token)).status == 200
        assert http.call("GET", fetch, headers=bearer(token)).status == 429, "60 KB read at 20 KB/s"
        assert _poll_until_ok(lambda: http.call("GET", fetch, headers=bearer(token))).status == 200
        # per-user overrides: unlimited for this user
        http.json("POST", "/v1/users", 201, headers=bearer(token), body={
            "username": "fast", "password": "fast-password", "quotas": {"produce_bytes_per_s": 0}})
        http.json("PUT", "/v1/topics/q/acl", body={"user": "fast", "permissions": ["write"]}, headers=bearer(token))
        fast = login(http, "fast", "fast-password")
        for _ in range(3):
            assert http.call("POST", "/v1/topics/q/records", body=body, headers=bearer(fast)).status == 200


def test_connections_per_user_are_limited(tmp_path):
    with NodeProcess(str(tmp_path), *AUTH_ARGS, "--quota-connections-max", "2") as node:
        http = Http(node.url)
        token = login(http, ADMIN, ADMIN_PASSWORD)
        connections = [httpclient.HTTPConnection(http.host, http.port, timeout=30) for _ in range(3)]
        try:
            statuses = []
            for connection in connections:
                connection.request("GET", "/v1/topics", headers=bearer(token))
                response = connection.getresponse()
                response.read()
                statuses.append(response.status)
            assert statuses == [200, 200, 429]
            connections[0].close()

            def third():
                connections[2].close()
                connections[2] = httpclient.HTTPConnection(http.host, http.port, timeout=30)
                connections[2].request("GET", "/v1/topics", headers=bearer(token))
                response = connections[2].getresponse()
                response.read()
                return response

            assert _poll_until_ok(third).status == 200, "a closed connection frees its place"
        finally:
            for connection in connections:
                connection.close()


def test_https_with_generated_certificates(tmp_path):
    certs = tmp_path / "certs"
    made = subprocess.run([sys.executable, "-m", "logbroker", "certs", "--out", str(certs), "--nodes", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert made.returncode == 0, made.stderr
    assert {"ca.pem", "ca.key", "node-1.pem", "node-1.key"} <= {p.name for p in certs.iterdir()}
    with NodeProcess(str(tmp_path / "node"), *AUTH_ARGS, "--tls-cert-file", str(certs / "node-1.pem"),
                     "--tls-key-file", str(certs / "node-1.key")) as node:
        assert node.url.startswith("https://127.0.0.1:")
        port = int(node.url.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        secure = httpclient.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        secure.request("POST", "/v1/auth/token", body=json.dumps({"username": ADMIN, "password": ADMIN_PASSWORD}),
                       headers={"Content-Type": "application/json"})
        answer = secure.getresponse()
        assert answer.status == 200 and json.loads(answer.read())["token_type"] == "bearer"
        secure.close()
        untrusted = httpclient.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(), timeout=30)
        with pytest.raises(ssl.SSLCertVerificationError):
            untrusted.request("GET", "/healthz")
        untrusted.close()
        plain = httpclient.HTTPConnection("127.0.0.1", port, timeout=30)
        with pytest.raises((httpclient.HTTPException, ConnectionError)):
            plain.request("GET", "/healthz")
            plain.getresponse()
        plain.close()
