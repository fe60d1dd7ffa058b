"""A real cluster for the cluster benchmark: one etcd (``logbroker.etcd_process``) and N
``logbroker serve`` processes on loopback, set up as a deployment is: auth on with one signing key
shared by every node, the internal RPC over mutual TLS with a cluster token. Also a lone node with
the local coordinator and the same auth settings, the baseline of the metadata figures. Every
process is stopped by PID on the way out, also when starting fails."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Final

from logbroker.certs import generate
from logbroker.etcd_process import running_etcd
from logbroker.launcher import NodeProcess, cluster_args

ADMIN: Final = "bench-admin"
PASSWORD: Final = "bench-admin-password"
JWT_SECRET: Final = "a-benchmark-signing-secret-of-at-least-32-bytes"
CLUSTER_TOKEN: Final = "a-benchmark-cluster-token"
LEASE_TTL_MS: Final = 6_000
AUTH: Final = ("--auth", "on", "--admin-user", ADMIN, "--admin-password", PASSWORD, "--jwt-secret", JWT_SECRET,
               "--jwt-key-id", "bench")
QUIET: Final = ("--log-level", "warning")


@contextlib.contextmanager
def running_cluster(root: str, size: int = 3, *, racks: dict[int, str] | None = None) -> Iterator[list[NodeProcess]]:
    """etcd and ``size`` nodes (ids 1..size, with ``racks`` when given) under ``root``; the nodes
    in id order."""
    with running_etcd(os.path.join(root, "etcd")) as etcd, contextlib.ExitStack() as stack:
        certs = os.path.join(root, "certs")
        generate(certs, list(range(1, size + 1)))
        yield [stack.enter_context(cluster_node(root, etcd.url, node_id, rack=(racks or {}).get(node_id)))
               for node_id in range(1, size + 1)]


def cluster_node(root: str, etcd_url: str, node_id: int, *, lease_ttl_ms: int = LEASE_TTL_MS,
                 log_args: tuple[str, ...] = QUIET, log_path: str | None = None,
                 rack: str | None = None) -> NodeProcess:
    """Node ``node_id`` of the cluster under ``root`` (not started): its data in ``root/node-<id>``,
    its certificate from ``root/certs``. A node killed and made again with the same arguments
    comes back with its data (on new ports)."""
    return NodeProcess(os.path.join(root, f"node-{node_id}"), *log_args, *AUTH,
                       *cluster_args(etcd_url, os.path.join(root, "certs"), node_id, cluster_token=CLUSTER_TOKEN,
                                     lease_ttl_ms=lease_ttl_ms),
                       *(("--rack", rack) if rack else ()), node_id=node_id, log_path=log_path)


@contextlib.contextmanager
def running_local_node(root: str) -> Iterator[NodeProcess]:
    """One node with ``--coordinator local`` and the cluster's auth settings."""
    with NodeProcess(os.path.join(root, "local"), *QUIET, *AUTH, "--coordinator", "local") as node:
        yield node
