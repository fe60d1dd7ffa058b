"""Network namespaces for a chaos run: etcd and every node in a namespace of its own, each linked
by a veth pair to one bridge in the host's namespace, on a private /24 that no route of the host
uses. The harness (the clients) talks to them from the host through the bridge's address.

Cuts: ``isolate`` takes a node's link down (it loses etcd, its peers and its clients); ``cut``
adds blackhole routes both ways between two members (a node, ``etcd`` or ``clients``, the bridge's
address). ``heal`` undoes every cut. ``close`` deletes the namespaces and the bridge, also after a
failure; every ``ip`` call has a timeout. When the machine refuses any step, ``Network.create``
raises ``NetworkUnavailableError`` with the reason and leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Sequence
from typing import Final

IP_TIMEOUT_S: Final = 10.0
ETCD: Final = "etcd"
CLIENTS: Final = "clients"


class NetworkUnavailableError(RuntimeError):
    """Namespaces, veth pairs or a bridge cannot be made here."""


def ip(*args: str) -> None:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkUnavailableError(f"ip {' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise NetworkUnavailableError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _subnets_in_use() -> set[str]:
    try:
        out = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True, timeout=IP_TIMEOUT_S,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkUnavailableError(f"ip route: {exc}") from exc
    return {".".join(line.split()[0].split(".")[:3]) for line in out.splitlines() if line[:1].isdigit()}


class Network:
    def __init__(self, members: Sequence[str], prefix: str, subnet: str) -> None:
        self.prefix = prefix  # at most 5 characters: interface names are at most 15
        self.subnet = subnet  # "10.A.B"
        self.bridge = f"{prefix}br"
        self.members = list(members)
        self.address = {name: f"{subnet}.{10 + i}" for i, name in enumerate(self.members)}
        self.address[CLIENTS] = f"{subnet}.1"
        self.namespaces: list[str] = []
        self.links: dict[str, str] = {}  # member -> its host-side veth
        self.cuts: set[tuple[str, str]] = set()
        self.down: set[str] = set()

    def namespace(self, member: str) -> str:
        return f"{self.prefix}-{member}"

    def exec_prefix(self, member: str) -> list[str]:
        """Run a command in ``member``'s namespace (``ip netns exec`` keeps the PID: it execs)."""
        return ["ip", "netns", "exec", self.namespace(member)]

    @classmethod
    def create(cls, members: Sequence[str], *, prefix: str | None = None) -> Network:
        prefix = prefix or f"c{os.getpid() % 10000}"
        used = _subnets_in_use()
        seed = os.getpid()
        subnet = next((f"10.{200 + (seed + i) % 50}.{(seed // 50 + i) % 250}" for i in range(50)
                       if f"10.{200 + (seed + i) % 50}.{(seed // 50 + i) % 250}" not in used), None)
        if subnet is None:
            raise NetworkUnavailableError("no free private /24 for the namespaces")
        network = cls(members, prefix, subnet)
        try:
            network._build()
        except BaseException:
            network.close()
            raise
        return network

    def _build(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.address[CLIENTS]}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i, member in enumerate(self.members):
            ns, host_end, ns_end = self.namespace(member), f"{self.prefix}h{i}", f"{self.prefix}n{i}"
            ip("netns", "add", ns)
            self.namespaces.append(ns)
            ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            self.links[member] = host_end
            ip("link", "set", ns_end, "netns", ns)
            ip("link", "set", host_end, "master", self.bridge)
            ip("link", "set", host_end, "up")
            ip("netns", "exec", ns, "ip", "addr", "add", f"{self.address[member]}/24", "dev", ns_end)
            ip("netns", "exec", ns, "ip", "link", "set", ns_end, "up")
            ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def isolate(self, member: str) -> None:
        ip("link", "set", self.links[member], "down")
        self.down.add(member)

    def _route(self, action: str, member: str, peer: str) -> None:
        if member == CLIENTS:
            ip("route", action, "blackhole", f"{self.address[peer]}/32")
        else:
            ip("netns", "exec", self.namespace(member), "ip", "route", action, "blackhole", f"{self.address[peer]}/32")

    def cut(self, a: str, b: str) -> None:
        """Neither of ``a`` and ``b`` reaches the other (a blackhole route on each side)."""
        for member, peer in ((a, b), (b, a)):
            if (member, peer) not in self.cuts:
                self._route("add", member, peer)
                self.cuts.add((member, peer))

    def heal(self) -> None:
        for member, peer in sorted(self.cuts):
            self._route("del", member, peer)
            self.cuts.discard((member, peer))
        for member in sorted(self.down):
            ip("link", "set", self.links[member], "up")
            self.down.discard(member)

    def close(self) -> None:
        """Delete what was made (best effort: each step is tried)."""
        for member, peer in list(self.cuts):
            if member == CLIENTS:
                with contextlib.suppress(NetworkUnavailableError):
                    self._route("del", member, peer)
        self.cuts.clear()
        for ns in self.namespaces:
            with contextlib.suppress(NetworkUnavailableError):
                ip("netns", "del", ns)
        for link in self.links.values():
            with contextlib.suppress(NetworkUnavailableError):
                ip("link", "del", link)
        with contextlib.suppress(NetworkUnavailableError):
            ip("link", "del", self.bridge)
        self.namespaces.clear()
        self.links.clear()
