"""One real node per test module (started once, stopped by PID), plus a plain HTTP(S) helper
(``http.client`` from the standard library: no client library between the test and the wire)."""

from __future__ import annotations

import http.client as httpclient
import json
import ssl
import urllib.parse
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from tests.support.nodes import NodeProcess

TIMEOUT_S = 60


class Reply(NamedTuple):
    status: int
    headers: dict[str, str]
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data)


class Http:
    def __init__(self, url: str, *, tls: ssl.SSLContext | None = None, source: str | None = None) -> None:
        """An ``https://`` url is called over TLS with ``tls`` (default: the system's CAs);
        ``source``: the local address to call from (any of 127/8 on loopback)."""
        parsed = urllib.parse.urlsplit(url)
        self.secure = parsed.scheme == "https"
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or (443 if self.secure else 80)
        self.tls = tls
        self.source = (source, 0) if source else None

    def connect(self) -> httpclient.HTTPConnection:
        if self.secure:
            return httpclient.HTTPSConnection(self.host, self.port, timeout=TIMEOUT_S, context=self.tls,
                                              source_address=self.source)
        return httpclient.HTTPConnection(self.host, self.port, timeout=TIMEOUT_S, source_address=self.source)

    def call(self, method: str, path: str, *, body: Any = None, raw: bytes | None = None,
             content_type: str | None = None, headers: dict[str, str] | None = None) -> Reply:
        all_headers = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        if content_type is not None:
            all_headers["Content-Type"] = content_type
        connection = self.connect()
        try:
            connection.request(method, path, body=data, headers=all_headers)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def json(self, method: str, path: str, expect: int = 200, **kwargs: Any) -> Any:
        reply = self.call(method, path, **kwargs)
        assert reply.status == expect, (reply.status, reply.data[:500])
        return reply.json() if reply.data else None


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("node")), "--request-body-bytes-max", "1048576") as process:
        yield process


@pytest.fixture(scope="module")
def http(node: NodeProcess) -> Http:
    return Http(node.url)
