"""A real etcd for tests: ``logbroker.etcd_process`` (shared with the benchmarks), under the names
the tests import."""

from __future__ import annotations

import contextlib
import random
import socket
from typing import Final

from logbroker.etcd_process import EtcdServer, etcd_binary, free_port, running_etcd

__all__ = ["EtcdServer", "etcd_binary", "free_port", "free_ports", "running_etcd"]


LISTEN_PORTS: Final = range(20_000, 32_000)  # below Linux's ephemeral range (32768-60999)
PICKS_MAX: Final = 2_000


def free_ports(count: int) -> list[int]:
    """``count`` different free loopback ports for servers a test starts later, below the range
    the system hands out for outgoing connections, so that no client connection made meanwhile
    (by the test, or the servers it already started) takes one first; each socket is held until
    all are picked, so no port comes twice."""
    rng = random.Random()
    with contextlib.ExitStack() as stack:
        picked: list[int] = []
        for _ in range(PICKS_MAX):
            if len(picked) == count:
                return picked
            port = rng.choice(LISTEN_PORTS)
            if port in picked:
                continue
            held = stack.enter_context(socket.socket())
            try:
                held.bind(("127.0.0.1", port))
            except OSError:
                continue
            picked.append(port)
    raise RuntimeError(f"no {count} free ports in {LISTEN_PORTS} after {PICKS_MAX} tries")
