"""A real cluster for tests: one etcd (``tests.support.etcd``) and N ``logbroker serve``
processes on loopback with free ports, auth on, mutual TLS and a cluster token on the internal
RPC, one shared signing key; ``etcd_tls`` puts etcd behind TLS with client-certificate auth and
gives the nodes its client certificate. Every process is stopped by PID, also when a test fails."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from logbroker.certs import generate
from logbroker.launcher import cluster_args
from tests.support.auth import AUTH_ARGS
from tests.support.etcd import EtcdServer, running_etcd
from tests.support.http import Http
from tests.support.nodes import NodeProcess

CLUSTER_TOKEN: Final = "a-cluster-token-for-tests"
LEASE_TTL_MS: Final = 2_000
WAIT_S: Final = 30.0


def wait_until(check: Callable[[], Any], *, timeout_s: float = WAIT_S, interval_s: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy (returned), or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (AssertionError, OSError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval_s)
    raise AssertionError(f"not within {timeout_s} s: {last!r}")


class Cluster:
    def __init__(self, root: str, etcd: EtcdServer, *, extra: tuple[str, ...] = (),
                 racks: dict[int, str] | None = None) -> None:
        self.root = root
        self.etcd = etcd
        self.extra = extra
        self.racks = racks or {}
        self.certs = os.path.join(root, "certs")
        generate(self.certs, list(range(1, 10)))
        self.nodes: dict[int, NodeProcess] = {}

    def node_args(self, node_id: int) -> tuple[str, ...]:
        return (*AUTH_ARGS, *cluster_args(self.etcd.url, self.certs, node_id, cluster_token=CLUSTER_TOKEN,
                                          lease_ttl_ms=LEASE_TTL_MS), *self.etcd.node_flags(), *self.extra,
                *(("--rack", self.racks[node_id]) if node_id in self.racks else ()))

    def start(self, node_id: int) -> NodeProcess:
        process = NodeProcess(os.path.join(self.root, f"node-{node_id}"), *self.node_args(node_id), node_id=node_id)
        self.nodes[node_id] = process
        return process.start()

    def http(self, node_id: int) -> Http:
        return Http(self.nodes[node_id].url)

    def stop(self) -> None:
        for process in self.nodes.values():
            process.stop()
            process.kill()


@contextmanager
def running_cluster(root: str, size: int = 3, *, extra: tuple[str, ...] = (),
                    racks: dict[int, str] | None = None, etcd_tls: bool = False) -> Iterator[Cluster]:
    with running_etcd(os.path.join(root, "etcd"), certs_dir=os.path.join(root, "etcd-certs") if etcd_tls else None
                      ) as etcd:
        cluster = Cluster(root, etcd, extra=extra, racks=racks)
        try:
            for node_id in range(1, size + 1):
                cluster.start(node_id)
            yield cluster
        finally:
            cluster.stop()
