"""Slow and half-open clients against real nodes: a request head not complete within
``header_timeout_ms`` closes its connection (first request, keep-alive, TLS, a TLS handshake that
never comes), while normal requests, idle keep-alive connections, long-polls, push streams and
bodies sent in pieces are untouched; a late body gets 408; past ``connections_max`` a new
connection gets a 503 problem and is closed, and connections are accepted again once some close.

These tests drive aiohttp through the hooks ``http_api.listener`` relies on (its server's request
factory and handler): if a new aiohttp stops calling them, the keep-alive cases here fail."""

from __future__ import annotations

import asyncio
import http.client as httpclient
import json
import re
import select
import selectors
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from logbroker.client import Client
from tests.conftest import ROOT
from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess

HEADER_TIMEOUT_S = 0.5
BODY_TIMEOUT_S = 1.5
# The node's own idle bound is far away, so any close seen here within CLOSE_SLACK_S is the head bound.
KEEPALIVE_TIMEOUT_S = 60
CLOSE_SLACK_S = 10.0
# After answering a request whose body it did not read to the end, aiohttp discards the rest for
# at most this long before it closes the connection (RequestHandler's lingering_time).
AIOHTTP_LINGERING_S = 10.0
HALF_OPEN_CONNECTIONS = 200
PAST_THE_BOUND_S = 3 * HEADER_TIMEOUT_S
HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
FULL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
BOUNDS = ("--header-timeout-ms", str(int(HEADER_TIMEOUT_S * 1000)), "--body-timeout-ms",
          str(int(BODY_TIMEOUT_S * 1000)), "--keepalive-timeout-ms", str(KEEPALIVE_TIMEOUT_S * 1000))


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("bounded")), *BOUNDS) as process:
        yield process


@pytest.fixture(scope="module")
def api(bounded: NodeProcess) -> Http:
    api = Http(bounded.url)
    api.json("POST", "/v1/topics", expect=201, body={"name": "slow"})
    return api


def _port(node: NodeProcess) -> int:
    return int(node.url.rsplit(":", 1)[1])


def _connect(node: NodeProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(node)), timeout=CLOSE_SLACK_S)


def _wait_closed(sockets: list[socket.socket], limit_s: float) -> dict[socket.socket, float]:
    """Seconds (since this call) until each socket saw EOF or a reset; missing ones stayed open."""
    started = time.monotonic()
    closed: dict[socket.socket, float] = {}
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        while len(closed) < len(sockets) and time.monotonic() - started < limit_s:
            for key, _ in selector.select(timeout=0.1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)
                except (ConnectionError, ssl.SSLError):
                    data = b""
                except ssl.SSLWantReadError:
                    continue
                if not data:
                    closed[sock] = time.monotonic() - started
                    selector.unregister(sock)
    return closed


def _still_open_after(sock: socket.socket, wait_s: float) -> bool:
    readable, _, _ = select.select([sock], [], [], wait_s)
    return not readable


def _response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    reply = httpclient.HTTPResponse(sock)
    reply.begin()
    return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()


def _metric(api: Http, name: str) -> float:
    text = api.call("GET", "/metrics").data.decode()
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def test_half_heads_and_silent_connections_close_within_the_bound_while_others_are_served(bounded, api):
    before = _metric(api, "logbroker_http_header_timeouts_total")
    opened_at = time.monotonic()
    sockets = [_connect(bounded) for _ in range(HALF_OPEN_CONNECTIONS)]
    for sock in sockets[: HALF_OPEN_CONNECTIONS // 2]:
        sock.sendall(HALF_HEAD)
    try:
        assert api.call("GET", "/healthz").status == 200
        waited_s = time.monotonic() - opened_at
        closed = _wait_closed(sockets, CLOSE_SLACK_S)
        assert len(closed) == len(sockets), f"{len(sockets) - len(closed)} slow connections left open"
        assert min(closed.values()) + waited_s >= HEADER_TIMEOUT_S - 0.05, "closed before the bound"
    finally:
        for sock in sockets:
            sock.close()
    assert _metric(api, "logbroker_http_header_timeouts_total") - before >= HALF_OPEN_CONNECTIONS


def test_keep_alive_idles_freely_but_a_half_next_head_is_closed(bounded, api):
    connection = httpclient.HTTPConnection("127.0.0.1", _port(bounded), timeout=CLOSE_SLACK_S)
    try:
        connection.request("GET", "/healthz")
        assert json.loads(connection.getresponse().read()) == {"status": "ok"}
        assert connection.sock is not None
        assert _still_open_after(connection.sock, PAST_THE_BOUND_S), "an idle keep-alive connection was closed"
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200, "the same connection serves a request after idling"
        sock = connection.sock
        sock.sendall(HALF_HEAD)
        assert sock in _wait_closed([sock], CLOSE_SLACK_S)
    finally:
        connection.close()


def test_a_body_sent_in_pieces_is_not_a_slow_head(bounded, api):
    body = json.dumps({"records": [{"value": "in pieces"}]}).encode()
    head = (f"POST /v1/topics/slow/records HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with _connect(bounded) as sock:
        sock.sendall(head)
        assert _still_open_after(sock, HEADER_TIMEOUT_S / 2)
        sock.sendall(body[:5])
        assert _still_open_after(sock, HEADER_TIMEOUT_S / 2)
        sock.sendall(body[5:])
        status, _, answer = _response(sock)
        assert status == 200 and len(json.loads(answer)["offsets"]) == 1
        assert _still_open_after(sock, PAST_THE_BOUND_S), "the body's bytes started the head clock"
        sock.sendall(FULL_HEAD)
        assert _response(sock)[0] == 200


def test_a_late_body_gets_408_and_its_connection_closes_without_writing(bounded, api):
    latest = api.json("GET", "/v1/topics/slow/partitions/0/offsets?at=latest")
    with _connect(bounded) as sock:
        sock.sendall(b"POST /v1/topics/slow/records HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"records\": [")
        status, headers, answer = _response(sock)
        assert status == 408 and headers["connection"] == "close"
        problem = json.loads(answer)
        assert problem["type"].endswith("/errors/request_timeout") and "body_timeout_ms" in problem["detail"]
        assert sock in _wait_closed([sock], AIOHTTP_LINGERING_S + CLOSE_SLACK_S)
    assert api.json("GET", "/v1/topics/slow/partitions/0/offsets?at=latest") == latest


def test_a_long_poll_longer_than_the_head_bound_answers_and_keeps_its_connection(bounded, api):
    end = api.json("GET", "/v1/topics/slow/partitions/0/offsets?at=latest")["offset"]
    connection = httpclient.HTTPConnection("127.0.0.1", _port(bounded), timeout=CLOSE_SLACK_S + 30)
    try:
        wait_ms = int(PAST_THE_BOUND_S * 1000)
        started = time.monotonic()
        connection.request("GET", f"/v1/topics/slow/partitions/0/records?offset={end}&wait_ms={wait_ms}")
        answer = connection.getresponse()
        assert answer.status == 200 and json.loads(answer.read())["records"] == []
        assert time.monotonic() - started >= PAST_THE_BOUND_S - 0.05, "the long-poll did not wait"
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
    finally:
        connection.close()


def test_a_push_stream_outlives_the_head_bound(bounded, api):
    async def main() -> dict:
        async with Client(bounded.url) as client, client.stream("slow", 0, offset=None, keepalive_ms=50) as events:
            await asyncio.sleep(PAST_THE_BOUND_S)  # time must pass beyond the head bound: nothing to poll for
            await client.produce("slow", [{"value": "streamed", "partition": 0}])
            async with asyncio.timeout(CLOSE_SLACK_S):
                async for event in events:
                    if event.kind == "record":
                        return dict(json.loads(event.data))
        raise AssertionError("the stream ended")

    assert asyncio.run(main())["value"] == "streamed"


def test_connections_past_the_bound_get_503_and_are_accepted_again_later(tmp_path):
    limit = 4
    with NodeProcess(str(tmp_path / "capped"), "--connections-max", str(limit), "--connections-per-address-max",
                     str(limit)) as node:
        held = [httpclient.HTTPConnection("127.0.0.1", _port(node), timeout=CLOSE_SLACK_S) for _ in range(limit)]
        try:
            for connection in held:
                connection.request("GET", "/healthz")
                assert json.loads(connection.getresponse().read()) == {"status": "ok"}
            with _connect(node) as extra:
                extra.sendall(FULL_HEAD)
                status, headers, answer = _response(extra)
                assert status == 503 and headers["connection"] == "close" and int(headers["retry-after"]) >= 1
                assert headers["content-type"] == "application/problem+json"
                assert json.loads(answer)["type"].endswith("/errors/too_many_connections")
                assert extra in _wait_closed([extra], CLOSE_SLACK_S)
            held[0].request("GET", "/healthz")
            assert held[0].getresponse().status == 200, "a refusal does not disturb the connections held"
            for connection in held[:2]:
                connection.close()
            api = Http(node.url)
            deadline = time.monotonic() + CLOSE_SLACK_S
            while (status := api.call("GET", "/healthz").status) != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert status == 200, "no connection accepted after some closed"
            assert _metric(api, "logbroker_http_connections_refused_total") >= 1
            assert _metric(api, "logbroker_http_connections_max") == limit
            assert 1 <= _metric(api, "logbroker_http_connections_open") <= limit
        finally:
            for connection in held:
                connection.close()


def test_tls_half_heads_and_missing_handshakes_close_within_the_bound(tmp_path):
    certs = tmp_path / "certs"
    made = subprocess.run([sys.executable, "-m", "logbroker", "certs", "--out", str(certs), "--nodes", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert made.returncode == 0, made.stderr
    with NodeProcess(str(tmp_path / "tls"), *BOUNDS, "--tls-cert-file", str(certs / "node-1.pem"),
                     "--tls-key-file", str(certs / "node-1.key")) as node:
        assert node.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        secure = httpclient.HTTPSConnection("127.0.0.1", _port(node), context=context, timeout=CLOSE_SLACK_S)
        secure.request("GET", "/healthz")
        assert secure.getresponse().status == 200
        secure.close()
        half = context.wrap_socket(_connect(node), server_hostname="127.0.0.1")
        half.sendall(HALF_HEAD)
        half.setblocking(False)
        no_handshake = _connect(node)
        try:
            closed = _wait_closed([half, no_handshake], CLOSE_SLACK_S)
            assert half in closed, "a half head over TLS was left open"
            assert no_handshake in closed, "a connection without a TLS handshake was left open"
        finally:
            half.close()
            no_handshake.close()


def _connect_from(node: NodeProcess, source: str) -> socket.socket:
    """A connection to the node from loopback address ``source`` (all of 127/8 is local on Linux)."""
    return socket.create_connection(("127.0.0.1", _port(node)), timeout=CLOSE_SLACK_S, source_address=(source, 0))


def _served_from(node: NodeProcess, source: str) -> tuple[int, dict[str, str], bytes]:
    with _connect_from(node, source) as sock:
        sock.sendall(FULL_HEAD)
        return _response(sock)


def test_half_heads_from_one_address_up_to_the_node_bound_leave_other_addresses_served(tmp_path):
    """The attack as it came: one address opens as many half-sent heads as the node's bound allows.
    Only its share (a tenth of the bound by default) is held; another address is served."""
    limit = 20
    with NodeProcess(str(tmp_path / "flooded"), "--connections-max", str(limit), "--header-timeout-ms",
                     "30000") as node:
        flood = [_connect_from(node, "127.0.0.2") for _ in range(limit)]
        try:
            for sock in flood:
                sock.sendall(HALF_HEAD)
            status, _, answer = _served_from(node, "127.0.0.4")
            assert status == 200, (status, answer)
            closed = _wait_closed(flood, 1.0)
            assert len(flood) - len(closed) == limit // 10, "the address holds more than its share"
        finally:
            for sock in flood:
                sock.close()


def test_one_address_holding_its_share_of_half_heads_leaves_others_served(tmp_path):
    """An address filling its share with half-sent heads gets 429 for one more, while another
    address (and a trusted proxy's, which has no share of its own) is still served; the node-wide
    bound (20 here) is not reached by one address."""
    share = 5
    with NodeProcess(str(tmp_path / "shared"), "--connections-max", "20", "--connections-per-address-max",
                     str(share), "--trusted-proxies", "127.0.0.3/32", "--header-timeout-ms", "30000") as node:
        held = [_connect_from(node, "127.0.0.2") for _ in range(share)]
        try:
            for sock in held:
                sock.sendall(HALF_HEAD)
            status, headers, answer = _served_from(node, "127.0.0.2")
            assert status == 429 and headers["connection"] == "close" and int(headers["retry-after"]) >= 1
            problem = json.loads(answer)
            assert problem["code"] == "too_many_requests" and "connections_per_address_max" in problem["detail"]
            assert _served_from(node, "127.0.0.4")[0] == 200, "another address is served"
            proxied = [_connect_from(node, "127.0.0.3") for _ in range(share + 2)]
            try:
                for sock in proxied:
                    sock.sendall(HALF_HEAD)
                assert _served_from(node, "127.0.0.3")[0] == 200, "a trusted proxy is past the share"
            finally:
                for sock in proxied:
                    sock.close()
            api = Http(node.url)
            assert _metric(api, "logbroker_http_connections_per_address_max") == share
            assert _metric(api, "logbroker_http_connections_refused_per_address_total") >= 1
            assert _metric(api, "logbroker_http_connections_refused_total") == 0
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + CLOSE_SLACK_S
        while (status := _served_from(node, "127.0.0.2")[0]) != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status == 200, "the address is served again once its connections closed"


def test_tls_handshakes_never_started_or_never_finished_count_from_accept_and_close_soon(tmp_path):
    """Under TLS a connection holds its address's share from accept, before any handshake: silent
    and half-sent handshakes are closed after ``tls_handshake_timeout_ms`` (far shorter than the
    head bound here), one more from that address is closed at once, another address is served."""
    handshake_s, share = 0.5, 3
    certs = tmp_path / "certs"
    made = subprocess.run([sys.executable, "-m", "logbroker", "certs", "--out", str(certs), "--nodes", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert made.returncode == 0, made.stderr
    with NodeProcess(str(tmp_path / "tls"), "--tls-cert-file", str(certs / "node-1.pem"), "--tls-key-file",
                     str(certs / "node-1.key"), "--header-timeout-ms", "30000", "--tls-handshake-timeout-ms",
                     str(int(handshake_s * 1000)), "--connections-per-address-max", str(share)) as node:
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        stalled = [_connect_from(node, "127.0.0.2") for _ in range(share)]
        stalled[0].sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
        try:
            deadline = time.monotonic() + CLOSE_SLACK_S
            while _https_metric(node, context, "logbroker_http_connections_open") < share + 1:  # + this scrape
                assert time.monotonic() < deadline, "the stalled connections were not counted"
                time.sleep(0.01)
            with _connect_from(node, "127.0.0.2") as extra:
                assert extra in _wait_closed([extra], handshake_s / 2), "one more from the address was accepted"
            other = httpclient.HTTPSConnection("127.0.0.1", _port(node), context=context, timeout=CLOSE_SLACK_S,
                                               source_address=("127.0.0.4", 0))
            other.request("GET", "/healthz")
            assert other.getresponse().status == 200, "another address is served"
            other.close()
            closed = _wait_closed(stalled, CLOSE_SLACK_S)
            assert len(closed) == share, "a stalled handshake was left open"
            assert max(closed.values()) < handshake_s + 2.0, closed
        finally:
            for sock in stalled:
                sock.close()
        assert _https_metric(node, context, "logbroker_http_tls_handshake_timeouts_total", "127.0.0.2") >= share


def _https_metric(node: NodeProcess, context: ssl.SSLContext, name: str, source: str = "127.0.0.1") -> float:
    connection = httpclient.HTTPSConnection("127.0.0.1", _port(node), context=context, timeout=CLOSE_SLACK_S,
                                            source_address=(source, 0))
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))
