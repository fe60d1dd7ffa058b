"""A local etcd process for the tests and the benchmarks: ``/usr/bin/etcd`` (or ``etcd`` on PATH) on
free loopback client and peer ports with a fresh data dir. It can be killed (SIGKILL) and restarted
on the same ports and data dir, and it is always reaped by PID, also when starting fails.

A free port is only probed, not held: another process (any outgoing connection takes an ephemeral
port) may bind it before etcd does. A first start that finds a port taken picks new ones, at most
``PORT_ATTEMPTS`` times (``start_on_free_ports``); a restart keeps its ports, as its clients expect.

Given a ``certs_dir``, etcd serves its clients over TLS only and requires a client certificate
(``--client-cert-auth``), with the etcd CA and certificates ``logbroker certs`` makes
(``generate_etcd``, made there when missing); ``url`` is then ``etcds://`` and ``node_flags()``
the flags that let a node in."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO

from logbroker.certs import etcd_files, generate_etcd

HEALTH_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 3
PORT_TAKEN = b"address already in use"


def etcd_binary() -> str | None:
    """The etcd executable, or None when this machine has none."""
    if os.access("/usr/bin/etcd", os.X_OK):
        return "/usr/bin/etcd"
    return shutil.which("etcd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PortTakenError(RuntimeError):
    """etcd could not bind a port it was given: another process took it first."""


class EtcdServer:
    """One etcd member. ``url`` is what an ``EtcdCoordinator`` is given (``etcd://127.0.0.1:PORT``)."""

    def __init__(self, data_dir: str, *, name: str = "etcd-local", certs_dir: str | None = None) -> None:
        binary = etcd_binary()
        if binary is None:
            raise RuntimeError("no etcd binary (/usr/bin/etcd or etcd on PATH)")
        self.binary = binary
        self.data_dir = data_dir
        self.name = name
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.certs = etcd_files(certs_dir) if certs_dir is not None else None
        if certs_dir is not None and not all(os.path.exists(p) for p in etcd_files(certs_dir).values()):
            generate_etcd(certs_dir)

    @property
    def tls(self) -> bool:
        return self.certs is not None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"etcds://{self.endpoint}" if self.tls else f"etcd://{self.endpoint}"

    def node_flags(self) -> tuple[str, ...]:
        """The ``logbroker serve`` flags of a node that reaches this etcd (none without TLS)."""
        if self.certs is None:
            return ()
        return ("--etcd-ca-file", self.certs["ca"], "--etcd-cert-file", self.certs["client_cert"],
                "--etcd-key-file", self.certs["client_key"])

    def _args(self) -> list[str]:
        client = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        tls = [] if self.certs is None else [
            "--client-cert-auth", "--trusted-ca-file", self.certs["ca"],
            "--cert-file", self.certs["server_cert"], "--key-file", self.certs["server_key"]]
        return [self.binary, "--name", self.name, "--data-dir", os.path.join(self.data_dir, "member-data"),
                "--listen-client-urls", client, "--advertise-client-urls", client, *tls,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"{self.name}={peer}", "--initial-cluster-state", "new",
                "--log-level", "warn", "--logger", "zap"]

    def _health_context(self) -> ssl.SSLContext | None:
        if self.certs is None:
            return None
        context = ssl.create_default_context(cafile=self.certs["ca"])
        context.load_cert_chain(self.certs["client_cert"], self.certs["client_key"])
        return context

    def start(self) -> EtcdServer:
        """Start (or start again) and wait until ``/health`` answers; killed on failure."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("etcd is already running")
        os.makedirs(self.data_dir, exist_ok=True)
        if self._log is None:
            self._log = open(os.path.join(self.data_dir, "etcd.log"), "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(self._args(), stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_healthy()
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                failure = PortTakenError if PORT_TAKEN in self._log_tail() else RuntimeError
                raise failure(f"etcd exited with {self.proc.returncode}; see {self.data_dir}/etcd.log")
            try:
                scheme = "https" if self.tls else "http"
                with urllib.request.urlopen(f"{scheme}://{self.endpoint}/health", timeout=1.0,
                                            context=self._health_context()) as resp:
                    if b'"true"' in resp.read():
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() >= deadline:
                raise RuntimeError(f"etcd not healthy after {HEALTH_TIMEOUT_S} s; see {self.data_dir}/etcd.log")
            time.sleep(0.05)

    def _log_tail(self, size: int = 4096) -> bytes:
        path = os.path.join(self.data_dir, "etcd.log")
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read()

    def start_on_free_ports(self) -> EtcdServer:
        """The first start: a port taken before etcd bound it is chosen again (bounded)."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self.start()
            except PortTakenError:
                if attempt == PORT_ATTEMPTS:
                    raise
                shutil.rmtree(os.path.join(self.data_dir, "member-data"), ignore_errors=True)
                self.client_port, self.peer_port = free_port(), free_port()
        raise AssertionError("unreachable")

    def kill(self) -> None:
        """SIGKILL (a crash): the data dir keeps what was committed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> EtcdServer:
        """Kill and start again on the same ports and data dir."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.contextmanager
def running_etcd(data_dir: str, *, certs_dir: str | None = None) -> Iterator[EtcdServer]:
    """An ``EtcdServer`` started for the block and stopped (reaped) after it, also on failure
    (over TLS with client-certificate auth given a ``certs_dir``)."""
    server = EtcdServer(data_dir, certs_dir=certs_dir)
    try:
        yield server.start_on_free_ports()
    finally:
        server.stop()
