"""Ends a crashed peer's session before its lease lapses, on evidence that its process is gone
(decision 0260; the rules are ``logbroker.crash_evidence``).

A hint starts a look: a call to the peer went unanswered (``Peers``), a connection the peer made
to this node ended (the internal RPC server), or another node recorded a crash witness of it; the
last two are strong hints, followed by up to ``LOOKS_ON_EVIDENCE`` looks (a process being torn
down closes its listeners one by one).
A look probes every address of the peer's current registration with a plain TCP connect; when
all refuse, this node records itself as a witness of that registration in the coordinator, and
once the witnesses are enough it ends the session: the peer's leaderships go with it and its
partitions are elected elsewhere at once. A peer that is only unreachable (partitioned, paused,
behind a dropping firewall) never refuses, so it keeps its session until its lease lapses.

Bounds: one look at a time per peer, looks of one peer at least ``PROBE_SPACING_S`` apart (hints
that come meanwhile are folded into the looks still to take), each probe within
``PROBE_TIMEOUT_S``, only registered peers are looked at, and a session is witnessed once (a node
with a broken route does not keep writing to etcd, nor keep the others probing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Final

from coordinator.base import Coordinator
from coordinator.errors import CoordinatorError
from coordinator.models import NodeInfo
from logbroker.crash_evidence import Probe, crashed, evicts, may_probe, probe_outcome

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S: Final = 0.5
PROBE_SPACING_S: Final = 0.2
# Looks after a strong hint (the peer's connection ended, another node witnessed its crash): a
# process being torn down closes its sockets one by one, so a first look may still find a port open.
LOOKS_ON_EVIDENCE: Final = 4

ProbeAddress = Callable[[str, int], Awaitable[Probe]]


async def tcp_probe(host: str, port: int) -> Probe:
    """Open a TCP connection to ``host:port`` and close it at once (nothing is sent)."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    except (OSError, TimeoutError) as exc:
        return probe_outcome(exc)
    return probe_outcome(None)


def addresses(info: NodeInfo) -> list[tuple[str, int]]:
    """Every address a node registered (internal RPC, HTTP, gRPC), as (host, port)."""
    found = []
    for address in (info.rpc_address, info.grpc_address):
        host, _, port = address.rpartition(":")
        if host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    if info.http_url:
        url = urllib.parse.urlsplit(info.http_url)
        if url.hostname and url.port:
            found.append((url.hostname, url.port))
    return found


class CrashWatch:
    def __init__(self, coordinator: Coordinator, *, probe: ProbeAddress = tcp_probe,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._coordinator = coordinator
        self._probe = probe
        self._clock = clock
        self._wanted: dict[int, int] = {}  # node -> looks still to take
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._last_look: dict[int, float] = {}
        self._witnessed: dict[int, int] = {}  # node -> the lease of its session this node witnessed
        self._closed = False
        self.ended: list[int] = []  # the peers whose sessions this node ended (for the log and tests)

    def suspect(self, node_id: int, looks: int = 1) -> None:
        """A hint that ``node_id`` may have crashed: take up to ``looks`` looks (the first soon)
        unless it is this node or not registered."""
        if self._closed or node_id == self._coordinator.node_id or self._coordinator.cached_node(node_id) is None:
            return
        self._wanted[node_id] = max(self._wanted.get(node_id, 0), looks)
        if node_id not in self._tasks:
            self._tasks[node_id] = asyncio.get_running_loop().create_task(self._looks(node_id),
                                                                          name=f"crash-watch-{node_id}")

    def departed(self, node_id: int) -> None:
        """A strong hint: ``node_id``'s connection to this node ended, or another node witnessed
        its crash."""
        self.suspect(node_id, LOOKS_ON_EVIDENCE)

    async def _looks(self, node_id: int) -> None:
        try:
            while self._wanted.get(node_id, 0) > 0 and not self._closed:
                last = self._last_look.get(node_id)
                if not may_probe(last, self._clock(), PROBE_SPACING_S):
                    assert last is not None
                    await asyncio.sleep(PROBE_SPACING_S - (self._clock() - last))
                    continue
                self._wanted[node_id] -= 1
                self._last_look[node_id] = self._clock()
                try:
                    if await self._look(node_id):
                        break
                except CoordinatorError as exc:
                    log.info("crash look at node %d stopped: %s", node_id, exc)
        finally:
            self._tasks.pop(node_id, None)
            self._wanted.pop(node_id, None)

    async def _look(self, node_id: int) -> bool:
        """One look; True when there is nothing more to learn (the node is not registered, or
        this node has witnessed the crash of its session)."""
        session = self._coordinator.node_session(node_id)
        if session is None:
            return True
        if self._witnessed.get(node_id) == session.lease:
            return True  # said once: a process that was gone stays gone, and the last witness to come ends it
        targets = addresses(session.info)
        outcomes = list(await asyncio.gather(*(self._probe(host, port) for host, port in targets)))
        if not crashed(outcomes):
            return False
        witnesses = await self._coordinator.witness_crash(session)
        if witnesses is None:
            return True
        self._witnessed[node_id] = session.lease
        registered = len(await self._coordinator.nodes())
        log.warning("node %d refuses connections on every address it registered (%s); witnesses so far: %s",
                    node_id, ", ".join(f"{h}:{p}" for h, p in targets), sorted(witnesses))
        if evicts(witnesses, node_id, registered) and await self._coordinator.end_session(session):
            self.ended.append(node_id)
            log.warning("ended the session of node %d (lease %x): its process is gone (witnesses %s)",
                        node_id, session.lease, sorted(witnesses))
        return True

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
