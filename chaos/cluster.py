"""The processes of a chaos run: one etcd and N ``logbroker serve`` nodes, set up as a deployment
is (auth on, one shared signing key, the internal RPC over mutual TLS with a cluster token, etcd
over TLS with client-certificate auth, the admin's password and the cluster token in the
environment), each in its network namespace when a ``Network`` is given, else on loopback. Any of them can be killed
(SIGKILL), paused (SIGSTOP/SIGCONT) and started again on the same data dir and ports; every
process is reaped by PID. Node output goes to ``<root>/logs/node-N.log`` (kept as evidence)."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Final

from chaos.network import ETCD, Network
from chaos.slow_disk import SlowDisks
from logbroker.certs import generate, generate_etcd
from logbroker.etcd_process import EtcdServer, free_port
from logbroker.launcher import NodeProcess, cluster_args
from segments.key_ring import KeyRing, new_key, write_ring

ADMIN: Final = "chaos-admin"
PASSWORD: Final = "chaos-admin-password"
JWT_SECRET: Final = "a-chaos-signing-secret-of-at-least-32-bytes"
CLUSTER_TOKEN: Final = "a-chaos-cluster-token"
LEASE_TTL_MS: Final = 2_000
ETCD_CLIENT_PORT: Final = 2379
ETCD_PEER_PORT: Final = 2380
NAMESPACE_HTTP_PORT: Final = 8080
NAMESPACE_RPC_PORT: Final = 9090
SEGMENT_BYTES_MIN: Final = 8192  # the compacted topic's small segments (chaos.run)
ROOT: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout the nodes run from


class NamespacedEtcd(EtcdServer):
    """etcd in its namespace, listening on the namespace's address (fixed ports: the namespace
    has nothing else)."""

    def __init__(self, data_dir: str, network: Network, certs_dir: str) -> None:
        super().__init__(data_dir, name="etcd-chaos", certs_dir=certs_dir)
        self.network = network
        self.host = network.address[ETCD]
        self.client_port, self.peer_port = ETCD_CLIENT_PORT, ETCD_PEER_PORT

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    def _args(self) -> list[str]:
        args = super()._args()
        return [*self.network.exec_prefix(ETCD), *(a.replace("127.0.0.1", self.host) for a in args)]


class Node(NodeProcess):
    def __init__(self, data_dir: str, *extra: str, node_id: int, ports: tuple[int, int], log_path: str,
                 network: Network | None, env: dict[str, str] | None = None) -> None:
        host = "127.0.0.1" if network is None else network.address[f"node-{node_id}"]
        super().__init__(data_dir, "--log-level", "info", "--http-host", host, "--advertised-host", host,
                         "--http-port", str(ports[0]), "--rpc-port", str(ports[1]),
                         "--maintenance-interval-ms", "200", "--topic-segment-bytes-min", str(SEGMENT_BYTES_MIN),
                         *extra, node_id=node_id, log_path=log_path,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
        if network is not None:
            self.args = [*network.exec_prefix(f"node-{node_id}"), *self.args]


class ChaosCluster:
    def __init__(self, root: str, size: int = 3, *, network: Network | None = None,
                 slow_disks: SlowDisks | None = None, lease_ttl_ms: int = LEASE_TTL_MS,
                 encryption: bool = False) -> None:
        self.root, self.size, self.network, self.slow_disks = root, size, network, slow_disks
        # One key ring for every node (decision 0316: followers copy what the leader sealed).
        self.keys_file: str | None = None
        if encryption:
            self.keys_file = os.path.join(root, "encryption-keys")
            write_ring(self.keys_file, KeyRing({1: new_key()}, 1))
        self.lease_ttl_ms = lease_ttl_ms
        self.node_ids = list(range(1, size + 1))
        self.certs = os.path.join(root, "certs")
        self.logs = os.path.join(root, "logs")
        os.makedirs(self.logs, exist_ok=True)
        hosts = [] if network is None else [network.address[f"node-{n}"] for n in self.node_ids]
        generate(self.certs, self.node_ids, hosts)
        generate_etcd(self.certs, [] if network is None else [network.address[ETCD]])
        self.etcd: EtcdServer = (EtcdServer(os.path.join(root, "etcd"), certs_dir=self.certs) if network is None
                                 else NamespacedEtcd(os.path.join(root, "etcd"), network, self.certs))
        self.nodes: dict[int, Node] = {}
        # Fixed per node, so that a restarted node is where the clients' bootstrap list says: its
        # namespace's own ports, or free loopback ports chosen once.
        self.ports = {n: (free_port(), free_port()) if network is None else (NAMESPACE_HTTP_PORT, NAMESPACE_RPC_PORT)
                      for n in self.node_ids}
        self.urls: dict[int, str] = {}
        self.paused: set[str] = set()

    def data_dir(self, node_id: int) -> str:
        return os.path.join(self.root, f"node-{node_id}")

    def start(self) -> ChaosCluster:
        self.etcd.start()
        for node_id in self.node_ids:
            self.start_node(node_id)
        return self

    def start_node(self, node_id: int) -> None:
        env = {"LOGBROKER_ADMIN_PASSWORD": PASSWORD, "LOGBROKER_CLUSTER_TOKEN": CLUSTER_TOKEN,
               **(self.slow_disks.env(f"node-{node_id}") if self.slow_disks is not None else {})}
        node = Node(self.data_dir(node_id), "--auth", "on", "--admin-user", ADMIN,
                    "--jwt-secret", JWT_SECRET, "--jwt-key-id", "chaos",
                    *cluster_args(self.etcd.url, self.certs, node_id, cluster_token=None,
                                  lease_ttl_ms=self.lease_ttl_ms), *self.etcd.node_flags(),
                    *(("--encryption-keys-file", self.keys_file) if self.keys_file is not None else ()),
                    node_id=node_id, ports=self.ports[node_id], log_path=os.path.join(self.logs, f"node-{node_id}.log"),
                    network=self.network, env=env)
        self.nodes[node_id] = node
        node.start()
        self.urls[node_id] = node.url

    def alive(self, node_id: int) -> bool:
        node = self.nodes.get(node_id)
        return node is not None and node.proc is not None and node.proc.poll() is None

    def kill_node(self, node_id: int) -> None:
        self.resume(f"node-{node_id}")
        self.nodes[node_id].kill()

    def pid(self, member: str) -> int | None:
        proc = self.etcd.proc if member == ETCD else self.nodes[int(member.removeprefix("node-"))].proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def pause(self, member: str) -> None:
        pid = self.pid(member)
        if pid is not None:
            os.kill(pid, signal.SIGSTOP)
            self.paused.add(member)

    def resume(self, member: str) -> None:
        pid = self.pid(member)
        if pid is not None and member in self.paused:
            os.kill(pid, signal.SIGCONT)
        self.paused.discard(member)

    def kill_etcd(self) -> None:
        self.resume(ETCD)
        self.etcd.kill()

    def restart_etcd(self) -> None:
        self.etcd.start()

    def stop(self) -> None:
        """Resume what is paused, stop the nodes (SIGTERM, SIGKILL after a bound), then etcd."""
        for member in list(self.paused):
            with contextlib.suppress(OSError):
                self.resume(member)
        for node in self.nodes.values():
            node.stop()
            node.kill()
        self.etcd.stop()
