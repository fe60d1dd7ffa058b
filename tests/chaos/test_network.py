"""The namespaces of a chaos run, for real: a server in one member's namespace is reachable from
the host (the clients) and from another member, and each cut stops exactly what it should until
``heal``; ``close`` leaves no namespace or link behind. Skipped, saying why, where the machine
refuses namespaces (the chaos run then skips its partition faults the same way)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from chaos.network import CLIENTS, Network, NetworkUnavailableError

PORT = 8765
SERVER = ("import socket,time\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind((%r, %d)); s.listen(16)\nwhile True:\n    c, _ = s.accept(); c.close()\n")


@pytest.fixture
def network() -> Iterator[Network]:
    try:
        made = Network.create(["a", "b"], prefix=f"t{time.monotonic_ns() % 1000}")
    except NetworkUnavailableError as exc:
        pytest.skip(f"network namespaces refused here: {exc}")
    server = subprocess.Popen([*made.exec_prefix("a"), sys.executable, "-c", SERVER % (made.address["a"], PORT)])
    try:
        yield made
    finally:
        server.kill()
        server.wait(timeout=10)
        made.close()


def reaches_from_host(address: str) -> bool:
    try:
        socket.create_connection((address, PORT), timeout=1.0).close()
    except OSError:
        return False
    return True


def reaches_from(network: Network, member: str, address: str) -> bool:
    probe = f"import socket; socket.create_connection(({address!r}, {PORT}), timeout=1.0).close()"
    return subprocess.run([*network.exec_prefix(member), sys.executable, "-c", probe], capture_output=True,
                          timeout=20).returncode == 0


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_cuts_stop_what_they_name_until_healed(network: Network):
    a = network.address["a"]
    assert eventually(lambda: reaches_from_host(a)) and reaches_from(network, "b", a)
    network.cut("a", CLIENTS)
    assert not reaches_from_host(a) and reaches_from(network, "b", a), "only the clients are cut off"
    network.heal()
    assert eventually(lambda: reaches_from_host(a))
    network.cut("a", "b")
    assert not reaches_from(network, "b", a) and reaches_from_host(a), "only the peer is cut off"
    network.heal()
    assert reaches_from(network, "b", a)
    network.isolate("a")
    assert not reaches_from_host(a) and not reaches_from(network, "b", a), "isolated from everyone"
    network.heal()
    assert eventually(lambda: reaches_from_host(a)) and reaches_from(network, "b", a)


def test_close_leaves_nothing_behind():
    try:
        network = Network.create(["x"], prefix=f"u{time.monotonic_ns() % 1000}")
    except NetworkUnavailableError as exc:
        pytest.skip(f"network namespaces refused here: {exc}")
    namespace, bridge = network.namespace("x"), network.bridge
    network.cut("x", CLIENTS)
    network.close()
    assert namespace not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    assert network.address["x"] not in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
