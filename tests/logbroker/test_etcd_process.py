"""The tests' etcd (``logbroker.etcd_process``): a port another process took between the probe and
etcd's bind is chosen again on a first start (bounded), and said when every choice is taken."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from logbroker import etcd_process
from logbroker.etcd_process import EtcdServer, PortTakenError


@pytest.fixture()
def taken_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_a_first_start_whose_port_was_taken_chooses_another(tmp_path, taken_port):
    server = EtcdServer(str(tmp_path / "etcd"))
    server.client_port = taken_port
    try:
        server.start_on_free_ports()
        assert server.client_port != taken_port
        assert server.proc is not None and server.proc.poll() is None
    finally:
        server.stop()


def test_when_every_choice_is_taken_the_start_fails_saying_so(tmp_path, taken_port, monkeypatch):
    monkeypatch.setattr(etcd_process, "free_port", lambda: taken_port)
    server = EtcdServer(str(tmp_path / "etcd"))
    try:
        with pytest.raises(PortTakenError):
            server.start_on_free_ports()
        assert server.proc is not None and server.proc.poll() is not None  # reaped, not left running
    finally:
        server.stop()
