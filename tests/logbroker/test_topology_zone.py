"""The zone lookup of the Kubernetes init container: against a real HTTPS server standing in for
the API server (its certificate from ``logbroker certs``, the bearer token checked), the file it
writes is a ``--config`` file that gives the node the zone as its rack; a node without the zone
label gives an empty rack; a refusal is an error that writes nothing."""

from __future__ import annotations

import http.server
import json
import os
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker import topology_zone
from logbroker.certs import generate
from logbroker.config import resolve

TOKEN = "service-account-token"


class _FakeApiServer(http.server.BaseHTTPRequestHandler):
    nodes: dict[str, Any] = {}
    status = 200

    def do_GET(self) -> None:
        name = self.path.removeprefix("/api/v1/nodes/")
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"kind": "Status", "code": 401})
        elif self.status != 200:
            self._answer(self.status, {"kind": "Status", "code": self.status})
        elif self.path.startswith("/api/v1/nodes/") and name in self.nodes:
            self._answer(200, self.nodes[name])
        else:
            self._answer(404, {"kind": "Status", "code": 404})

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api_server(tmp_path: Any) -> Iterator[tuple[dict[str, str], str, type[_FakeApiServer]]]:
    """An HTTPS server on 127.0.0.1 with the in-cluster variables and service-account directory
    that point at it; the handler class is returned to set its nodes and status."""
    certs = str(tmp_path / "certs")
    generate(certs, [1])
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(TOKEN + "\n")
    (account / "ca.crt").write_bytes((tmp_path / "certs" / "ca.pem").read_bytes())
    handler = type("Handler", (_FakeApiServer,), {"nodes": {}, "status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(os.path.join(certs, "node-1.pem"), os.path.join(certs, "node-1.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.server_address[1])}
    try:
        yield env, str(account), handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _run(env: dict[str, str], account: str, out: str, node: str = "worker-1") -> int:
    return topology_zone.main(["--node-name", node, "--out", out, "--service-account-dir", account], env=env)


def test_the_zone_of_the_pods_node_becomes_the_nodes_rack(api_server, tmp_path):
    env, account, handler = api_server
    handler.nodes = {"worker-1": {"kind": "Node", "metadata": {"name": "worker-1", "labels": {
        "topology.kubernetes.io/zone": "eu-west-1b", "kubernetes.io/hostname": "worker-1"}}}}
    out = str(tmp_path / "rack.toml")
    assert _run(env, account, out) == 0
    config = resolve({}, {"LOGBROKER_NODE_ID": "2"}, out)
    assert config.rack == "eu-west-1b" and config.node_id == 2


def test_a_node_without_a_zone_gives_an_empty_rack(api_server, tmp_path, capsys):
    env, account, handler = api_server
    handler.nodes = {"worker-1": {"kind": "Node", "metadata": {"name": "worker-1", "labels": {}}}}
    out = str(tmp_path / "rack.toml")
    assert _run(env, account, out) == 0
    assert resolve({}, {}, out).rack == ""
    assert "no topology.kubernetes.io/zone label" in capsys.readouterr().err


@pytest.mark.parametrize("status", [403, 404])
def test_a_refusal_is_an_error_and_writes_nothing(api_server, tmp_path, capsys, status):
    env, account, handler = api_server
    handler.status = status
    out = tmp_path / "rack.toml"
    assert _run(env, account, str(out)) == 1
    assert not out.exists()
    assert f"refused GET https://127.0.0.1:{env['KUBERNETES_SERVICE_PORT']}/api/v1/nodes/worker-1: {status}" \
        in capsys.readouterr().err


def test_a_wrong_token_is_refused(api_server, tmp_path):
    env, account, handler = api_server
    handler.nodes = {"worker-1": {"metadata": {"labels": {"topology.kubernetes.io/zone": "a"}}}}
    with open(os.path.join(account, "token"), "w") as f:
        f.write("someone-else")
    assert _run(env, account, str(tmp_path / "rack.toml")) == 1


def test_an_untrusted_api_server_certificate_is_an_error(api_server, tmp_path, capsys):
    env, account, handler = api_server
    handler.nodes = {"worker-1": {"metadata": {"labels": {"topology.kubernetes.io/zone": "a"}}}}
    generate(str(tmp_path / "other"), [])
    with open(os.path.join(account, "ca.crt"), "wb") as f:
        f.write((tmp_path / "other" / "ca.pem").read_bytes())
    assert _run(env, account, str(tmp_path / "rack.toml")) == 1
    assert "not signed by the cluster's CA" in capsys.readouterr().err


def test_outside_a_pod_it_says_so(tmp_path, capsys):
    assert _run({}, str(tmp_path), str(tmp_path / "rack.toml")) == 1
    assert "not inside a pod" in capsys.readouterr().err


LABEL_VALUES = st.from_regex(topology_zone.LABEL_VALUE, fullmatch=True)


@given(LABEL_VALUES)
def test_every_label_value_is_a_rack_the_node_accepts(zone):
    import tomllib

    assert tomllib.loads(topology_zone.rack_toml(zone)) == {"rack": zone}
    assert topology_zone.zone_of({"metadata": {"labels": {topology_zone.ZONE_LABEL: zone}}}) == zone


@given(st.text(max_size=80).filter(lambda s: topology_zone.LABEL_VALUE.fullmatch(s) is None))
def test_what_is_no_label_value_is_refused(zone):
    with pytest.raises(topology_zone.ZoneError):
        topology_zone.zone_of({"metadata": {"labels": {topology_zone.ZONE_LABEL: zone}}})
    with pytest.raises(topology_zone.ZoneError):
        topology_zone.rack_toml(zone)


def test_an_answer_that_is_no_node_is_refused():
    answers: list[dict[str, Any]] = [{}, {"metadata": []}, {"metadata": {"labels": ["a"]}}]
    for answer in answers:
        with pytest.raises(topology_zone.ZoneError):
            topology_zone.zone_of(answer)
