"""A real etcd for tests: ``logbroker.etcd_process`` (shared with the benchmarks), under the names
the tests import."""

from __future__ import annotations

import contextlib
import socket

from logbroker.etcd_process import EtcdServer, etcd_binary, free_port, running_etcd

__all__ = ["EtcdServer", "etcd_binary", "free_port", "free_ports", "running_etcd"]


def free_ports(count: int) -> list[int]:
    """``count`` different free loopback ports: each socket is held until all are picked, so the
    system cannot hand out one port twice (as ``free_port`` called again may)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for held in sockets:
            held.bind(("127.0.0.1", 0))
        return [held.getsockname()[1] for held in sockets]
