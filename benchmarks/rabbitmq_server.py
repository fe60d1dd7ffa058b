"""A throw-away RabbitMQ node for the benchmarks: its own node name, mnesia and log dirs, Erlang
cookie (``HOME``), a private ``epmd`` on its own loopback port, AMQP, stream and distribution
listeners on free 127.0.0.1 ports, and the ``rabbitmq_stream`` plugin enabled through a temp
enabled-plugins file. Nothing is shared with a system-wide RabbitMQ or epmd.

Stopping: ``rabbitmqctl stop`` first (a clean shutdown), then the processes this class started,
by PID (the launcher script, the Erlang VM from the node's pid file, the private epmd).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from typing import Final

from benchmarks.servers import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    Endpoint,
    free_port,
    kill_pid,
    package_version,
    stop_process,
    wait_for_port,
)

RABBITMQ_BIN: Final = "/usr/lib/rabbitmq/bin"
PID_FILE_WAIT_S: Final = 10.0


class RabbitMQServer:
    system = "rabbitmq"

    def __init__(self, work_dir: str | None = None) -> None:
        self.version = package_version("rabbitmq-server")
        self._work = tempfile.mkdtemp(prefix="bench-rabbitmq-", dir=work_dir)
        os.chmod(self._work, 0o755)
        self._node = f"bench{os.getpid()}@localhost"
        self._epmd: subprocess.Popen[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}

    def _write_config(self, amqp: int, stream: int) -> None:
        with open(os.path.join(self._work, "enabled_plugins"), "w", encoding="utf-8") as f:
            f.write("[rabbitmq_stream].\n")
        with open(os.path.join(self._work, "rabbitmq.conf"), "w", encoding="utf-8") as f:
            f.write(f"listeners.tcp.default = 127.0.0.1:{amqp}\n"
                    f"stream.listeners.tcp.default = 127.0.0.1:{stream}\n"
                    "stream.advertised_host = 127.0.0.1\n"
                    f"stream.advertised_port = {stream}\n"
                    "loopback_users = none\n")

    def start(self) -> Endpoint:
        amqp, stream, dist, epmd = free_port(), free_port(), free_port(), free_port()
        self._write_config(amqp, stream)
        erts = sorted(glob.glob("/usr/lib/erlang/erts-*/bin/epmd"))
        if not erts or not os.path.exists(os.path.join(RABBITMQ_BIN, "rabbitmq-server")):
            raise RuntimeError("rabbitmq-server is not installed (scripts/ensure-bench-deps.sh installs it)")
        self._env = {**os.environ, "HOME": self._work, "RABBITMQ_NODENAME": self._node,
                     "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(amqp),
                     "RABBITMQ_DIST_PORT": str(dist), "RABBITMQ_MNESIA_BASE": os.path.join(self._work, "mnesia"),
                     "RABBITMQ_LOG_BASE": os.path.join(self._work, "log"),
                     "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(self._work, "enabled_plugins"),
                     "RABBITMQ_CONFIG_FILE": os.path.join(self._work, "rabbitmq.conf"),
                     "RABBITMQ_PID_FILE": os.path.join(self._work, "rabbit.pid"),
                     "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(epmd)}
        try:
            self._epmd = subprocess.Popen([erts[-1], "-port", str(epmd)], env=self._env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(os.path.join(self._work, "server.out"), "wb") as out:
                self._proc = subprocess.Popen([os.path.join(RABBITMQ_BIN, "rabbitmq-server")], env=self._env,
                                              stdout=out, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + START_TIMEOUT_S
            wait_for_port(stream, deadline, self._proc)
            wait_for_port(amqp, deadline, self._proc)
            beam = self._beam_pid(time.monotonic() + PID_FILE_WAIT_S)
        except BaseException:
            self.stop()
            raise
        return Endpoint(self.system, "127.0.0.1", stream, beam, amqp_port=amqp)

    def _beam_pid(self, deadline: float) -> int:
        path = os.path.join(self._work, "rabbit.pid")
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError), open(path, encoding="utf-8") as f:
                return int(f.read().strip())
            time.sleep(0.1)
        assert self._proc is not None
        return self._proc.pid

    def stop(self) -> None:
        try:
            if self._proc is not None and self._proc.poll() is None:
                beam = self._beam_pid(time.monotonic())
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run([os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "-n", self._node, "stop"],
                                   env=self._env, capture_output=True, timeout=STOP_TIMEOUT_S)
                stop_process(self._proc)
                if beam != self._proc.pid:
                    kill_pid(beam)
            stop_process(self._epmd)
        finally:
            shutil.rmtree(self._work, ignore_errors=True)
