"""The systems under test as real server processes on free loopback ports with temporary data
dirs: a LogBroker node (reached over HTTP, or through its Kafka listener), nats-server with
JetStream on a file store, and a throw-away RabbitMQ node with the stream plugin. Each ``start()``
waits for the server's port to a deadline; ``stop()`` stops exactly the processes it started, by
PID, and removes the data dir, even after a failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, Final, Protocol

from benchmarks.kafka_settings import LISTENER_ARGS
from logbroker.launcher import NodeProcess

START_TIMEOUT_S: Final = 90.0
STOP_TIMEOUT_S: Final = 20.0
POLL_INTERVAL_S: Final = 0.05


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """How a client reaches a running system (picklable, handed to worker processes)."""

    system: str
    host: str
    port: int                       # LogBroker: HTTP (logbroker-kafka: the Kafka listener); nats: client port;
                                    # rabbitmq: stream port
    server_pid: int                 # the process whose CPU and memory the harness samples
    url: str = ""                   # LogBroker (both systems): the node's HTTP API
    amqp_port: int = 0


class Server(Protocol):
    system: str
    version: str

    def start(self) -> Endpoint: ...

    def stop(self) -> None: ...


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, deadline: float, proc: subprocess.Popen[Any] | None = None) -> None:
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before port {port} opened")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        time.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"port {port} did not open within the start timeout")


def stop_process(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGTERM) -> None:
    """Signal ``proc`` (by PID), wait to a bound, then SIGKILL; always reaped."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


def kill_pid(pid: int) -> None:
    """SIGTERM a process that is not our child (the RabbitMQ VM), then SIGKILL after a bound."""
    deadline = time.monotonic() + STOP_TIMEOUT_S
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(POLL_INTERVAL_S)
        os.kill(pid, signal.SIGKILL)


def package_version(package: str) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True,
                             timeout=10, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class LogBrokerServer:
    """One node (embedded coordinator) through ``logbroker.launcher.NodeProcess``."""

    system = "logbroker"

    def __init__(self, work_dir: str | None = None, *extra: str) -> None:
        from importlib.metadata import version

        self.version = version("logbroker")
        self._work = tempfile.mkdtemp(prefix="bench-logbroker-", dir=work_dir)
        self._node = NodeProcess(os.path.join(self._work, "data"), "--log-level", "warning", *extra)

    def start(self) -> Endpoint:
        self._node.start()
        host_port = self._node.url.rsplit(":", 1)
        return Endpoint(self.system, "127.0.0.1", int(host_port[1]), self._node.pid, url=self._node.url)

    def stop(self) -> None:
        try:
            self._node.stop()
            self._node.kill()
        finally:
            shutil.rmtree(self._work, ignore_errors=True)


class LogBrokerKafkaServer(LogBrokerServer):
    """The ``logbroker`` system's node, the same settings and durability (auth off, as there), with
    its Kafka listener on a free port: the endpoint's host and port are the listener's, its url the
    node's HTTP API, its ``server_pid`` the node's."""

    system = "logbroker-kafka"

    def __init__(self, work_dir: str | None = None) -> None:
        super().__init__(work_dir, *LISTENER_ARGS)

    def start(self) -> Endpoint:
        endpoint = super().start()
        host, port = self._node.kafka_address.rsplit(":", 1)
        return dataclasses.replace(endpoint, host=host, port=int(port))


class NatsServer:
    """``nats-server -js`` with its JetStream file store in a temp dir (one server, no cluster)."""

    system = "nats"

    def __init__(self, work_dir: str | None = None) -> None:
        self._work = tempfile.mkdtemp(prefix="bench-nats-", dir=work_dir)
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            out = subprocess.run(["nats-server", "--version"], capture_output=True, text=True, timeout=10)
            self.version = out.stdout.strip().removeprefix("nats-server: ") or "unknown"
        except (OSError, subprocess.SubprocessError):
            self.version = "unknown"

    def start(self) -> Endpoint:
        port = free_port()
        with open(os.path.join(self._work, "server.log"), "wb") as log:
            self._proc = subprocess.Popen(
                ["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", os.path.join(self._work, "js")],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, time.monotonic() + START_TIMEOUT_S, self._proc)
        except BaseException:
            self.stop()
            raise
        return Endpoint(self.system, "127.0.0.1", port, self._proc.pid, url=f"nats://127.0.0.1:{port}")

    def stop(self) -> None:
        try:
            stop_process(self._proc)
        finally:
            shutil.rmtree(self._work, ignore_errors=True)
