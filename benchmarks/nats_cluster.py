"""A throw-away three-server NATS JetStream cluster on loopback for the replication benchmark:
each server with its own config file (server name ``n1``..``n3`` and the same name as its only
server tag, so an R1 stream can be placed on a chosen server), client and route ports picked free
on 127.0.0.1, a JetStream file store in a temp dir. Started together (JetStream's meta group needs
a quorum), ready once every client port is open and the meta group has a leader; stopped by PID
(SIGTERM, then SIGKILL after a bound), also when starting fails, and the temp dir removed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Final

from benchmarks.servers import START_TIMEOUT_S, free_port, stop_process, wait_for_port

CLUSTER_NAME: Final = "bench"
META_READY_TIMEOUT_S: Final = 60.0
META_POLL_S: Final = 0.2


@dataclasses.dataclass(frozen=True)
class NatsNode:
    name: str          # the server name, also its server tag
    url: str           # nats://127.0.0.1:<client port>
    pid: int


class NatsCluster:
    def __init__(self, work_dir: str | None = None, size: int = 3) -> None:
        self.size = size
        self.version = _version()
        self._work = tempfile.mkdtemp(prefix="bench-nats-cluster-", dir=work_dir)
        self._procs: list[subprocess.Popen[bytes]] = []
        self.nodes: list[NatsNode] = []

    def _config(self, index: int, client: int, routes: list[int]) -> str:
        name = f"n{index + 1}"
        path = os.path.join(self._work, f"{name}.conf")
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in routes)
        with open(path, "w", encoding="utf-8") as f:
            f.write(f'server_name: "{name}"\n'
                    f'listen: "127.0.0.1:{client}"\n'
                    f'server_tags: ["{name}"]\n'
                    f'jetstream {{ store_dir: "{os.path.join(self._work, name)}" }}\n'
                    f'cluster {{ name: "{CLUSTER_NAME}", listen: "127.0.0.1:{routes[index]}", '
                    f"routes: [{route_urls}] }}\n")
        return path

    def start(self) -> list[NatsNode]:
        clients = [free_port() for _ in range(self.size)]
        routes = [free_port() for _ in range(self.size)]
        try:
            for index in range(self.size):
                config = self._config(index, clients[index], routes)
                with open(os.path.join(self._work, f"n{index + 1}.log"), "wb") as log:
                    self._procs.append(subprocess.Popen(["nats-server", "-c", config], stdout=log,
                                                        stderr=subprocess.STDOUT))
            deadline = time.monotonic() + START_TIMEOUT_S
            for port, proc in zip(clients, self._procs, strict=True):
                wait_for_port(port, deadline, proc)
        except BaseException:
            self.stop()
            raise
        self.nodes = [NatsNode(f"n{i + 1}", f"nats://127.0.0.1:{port}", proc.pid)
                      for i, (port, proc) in enumerate(zip(clients, self._procs, strict=True))]
        return self.nodes

    def url_of(self, name: str) -> str:
        return next(node.url for node in self.nodes if node.name == name)

    def stop(self) -> None:
        try:
            for proc in self._procs:
                stop_process(proc)
        finally:
            shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> NatsCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def wait_for_meta_leader(js: Any) -> None:
    """Until JetStream answers account info, which needs the meta group's leader (bounded)."""
    import nats.js.errors

    deadline = time.monotonic() + META_READY_TIMEOUT_S
    while True:
        try:
            await js.account_info()
            return
        except (nats.js.errors.Error, nats.errors.Error) as exc:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the NATS cluster had no JetStream leader within {META_READY_TIMEOUT_S} s") \
                    from exc
        await asyncio.sleep(META_POLL_S)


def _version() -> str:
    try:
        out = subprocess.run(["nats-server", "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip().removeprefix("nats-server: ") or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
