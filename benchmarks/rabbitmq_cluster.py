"""A throw-away three-node RabbitMQ cluster on loopback for the replication benchmark, built like
``rabbitmq_server.RabbitMQServer`` builds one node: every node with its own node name, mnesia, log
and config, AMQP, stream and distribution listeners on free 127.0.0.1 ports, the
``rabbitmq_stream`` plugin; the three share one private ``epmd`` on its own port and one Erlang
cookie (a ``HOME`` of their own), so nothing touches a system-wide RabbitMQ. Node 1 boots first;
nodes 2 and 3 boot beside it and join it with ``rabbitmqctl stop_app / reset / join_cluster /
start_app``; the cluster is ready once ``cluster_status`` lists the three as running.

Stopping: ``rabbitmqctl stop`` per node (a clean shutdown), then by PID the launcher scripts, the
Erlang VMs (from each node's pid file) and the private epmd, also when starting failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from typing import Final

from benchmarks.servers import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    free_port,
    kill_pid,
    package_version,
    stop_process,
    wait_for_port,
)

RABBITMQ_BIN: Final = "/usr/lib/rabbitmq/bin"
CTL_TIMEOUT_S: Final = 60.0
CLUSTER_READY_TIMEOUT_S: Final = 60.0
POLL_S: Final = 0.5


class RabbitMQClusterError(RuntimeError):
    """The cluster could not be formed; the message says which step failed and its output."""


@dataclasses.dataclass
class RabbitNode:
    name: str                     # the Erlang node name, bench<pid>-<n>@localhost
    amqp_port: int
    stream_port: int
    dist_port: int
    work: str
    proc: subprocess.Popen[bytes] | None = None
    beam_pid: int = 0


class RabbitMQCluster:
    def __init__(self, work_dir: str | None = None, size: int = 3) -> None:
        self.size = size
        self.version = package_version("rabbitmq-server")
        self._work = tempfile.mkdtemp(prefix="bench-rabbitmq-cluster-", dir=work_dir)
        os.chmod(self._work, 0o755)
        self._epmd_port = free_port()
        self._epmd: subprocess.Popen[bytes] | None = None
        self.nodes: list[RabbitNode] = []

    # ---- environment ---------------------------------------------------------------------------

    def _env(self, node: RabbitNode) -> dict[str, str]:
        return {**os.environ, "HOME": self._work, "RABBITMQ_NODENAME": node.name,
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(node.amqp_port),
                "RABBITMQ_DIST_PORT": str(node.dist_port), "RABBITMQ_MNESIA_BASE": os.path.join(node.work, "mnesia"),
                "RABBITMQ_LOG_BASE": os.path.join(node.work, "log"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(self._work, "enabled_plugins"),
                "RABBITMQ_CONFIG_FILE": os.path.join(node.work, "rabbitmq.conf"),
                "RABBITMQ_PID_FILE": os.path.join(node.work, "rabbit.pid"),
                "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(self._epmd_port)}

    def _prepare(self) -> None:
        with open(os.path.join(self._work, "enabled_plugins"), "w", encoding="utf-8") as f:
            f.write("[rabbitmq_stream].\n")
        cookie = os.path.join(self._work, ".erlang.cookie")
        with open(cookie, "w", encoding="utf-8") as f:
            f.write(secrets.token_hex(20).upper())
        os.chmod(cookie, 0o400)
        for n in range(1, self.size + 1):
            work = os.path.join(self._work, f"node-{n}")
            os.makedirs(work)
            node = RabbitNode(f"bench{os.getpid()}-{n}@localhost", free_port(), free_port(), free_port(), work)
            with open(os.path.join(work, "rabbitmq.conf"), "w", encoding="utf-8") as f:
                f.write(f"listeners.tcp.default = 127.0.0.1:{node.amqp_port}\n"
                        f"stream.listeners.tcp.default = 127.0.0.1:{node.stream_port}\n"
                        "stream.advertised_host = 127.0.0.1\n"
                        f"stream.advertised_port = {node.stream_port}\n"
                        "loopback_users = none\n")
            self.nodes.append(node)

    # ---- start ---------------------------------------------------------------------------------

    def start(self) -> list[RabbitNode]:
        erts = sorted(glob.glob("/usr/lib/erlang/erts-*/bin/epmd"))
        if not erts or not os.path.exists(os.path.join(RABBITMQ_BIN, "rabbitmq-server")):
            raise RabbitMQClusterError("rabbitmq-server is not installed (scripts/ensure-bench-deps.sh installs it)")
        try:
            self._prepare()
            self._epmd = subprocess.Popen([erts[-1], "-port", str(self._epmd_port)], env=self._env(self.nodes[0]),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for node in self.nodes:
                with open(os.path.join(node.work, "server.out"), "wb") as out:
                    node.proc = subprocess.Popen([os.path.join(RABBITMQ_BIN, "rabbitmq-server")],
                                                 env=self._env(node), stdout=out, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + START_TIMEOUT_S
            for node in self.nodes:
                wait_for_port(node.stream_port, deadline, node.proc)
                node.beam_pid = self._beam_pid(node, deadline)
            first = self.nodes[0]
            for node in self.nodes[1:]:
                for step in (["stop_app"], ["reset"], ["join_cluster", first.name], ["start_app"]):
                    self._ctl(node, *step)
            self._wait_clustered()
            for node in self.nodes:
                wait_for_port(node.stream_port, time.monotonic() + START_TIMEOUT_S, node.proc)
        except BaseException:
            self.stop()
            raise
        return self.nodes

    def _ctl(self, node: RabbitNode, *args: str) -> str:
        command = [os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "-n", node.name, *args]
        try:
            out = subprocess.run(command, env=self._env(node), capture_output=True, text=True, timeout=CTL_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise RabbitMQClusterError(f"rabbitmqctl {' '.join(args)} on {node.name}: no answer within "
                                       f"{CTL_TIMEOUT_S:g} s") from exc
        if out.returncode != 0:
            raise RabbitMQClusterError(f"rabbitmqctl {' '.join(args)} on {node.name} exited with {out.returncode}: "
                                       f"{(out.stderr or out.stdout).strip()[-600:]}")
        return out.stdout

    def _wait_clustered(self) -> None:
        deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
        wanted = {node.name for node in self.nodes}
        running: set[str] = set()
        while time.monotonic() < deadline:
            status = json.loads(self._ctl(self.nodes[0], "cluster_status", "--formatter", "json"))
            running = set(status.get("running_nodes", []))
            if running >= wanted:
                return
            time.sleep(POLL_S)
        raise RabbitMQClusterError(f"the cluster listed {sorted(running)} running, not all of {sorted(wanted)}, "
                                   f"within {CLUSTER_READY_TIMEOUT_S:g} s")

    def _beam_pid(self, node: RabbitNode, deadline: float) -> int:
        path = os.path.join(node.work, "rabbit.pid")
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError), open(path, encoding="utf-8") as f:
                return int(f.read().strip())
            time.sleep(0.1)
        raise RabbitMQClusterError(f"{node.name} wrote no pid file")

    # ---- stop ----------------------------------------------------------------------------------

    def stop(self) -> None:
        try:
            for node in self.nodes:
                if node.proc is None or node.proc.poll() is not None:
                    continue
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run([os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "-n", node.name, "stop"],
                                   env=self._env(node), capture_output=True, timeout=STOP_TIMEOUT_S)
            for node in self.nodes:
                stop_process(node.proc)
                if node.beam_pid and node.proc is not None and node.beam_pid != node.proc.pid:
                    kill_pid(node.beam_pid)
            stop_process(self._epmd)
        finally:
            shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> RabbitMQCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
