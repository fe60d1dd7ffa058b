"""Crash witnesses against a real etcd (decision 0260): evidence counts only for the registration
it was gathered on, one witness never ends a session, and the other nodes hear of a witness and
look for themselves (``CrashWatch`` with its probe replaced: the cluster tests use real ones)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from coordinator.etcd import EtcdCoordinator
from coordinator.etcd_client import parse_etcd_url
from coordinator.models import NodeInfo
from logbroker.crash_evidence import Probe
from logbroker.crash_watch import LOOKS_ON_EVIDENCE, CrashWatch
from tests.support.etcd import EtcdServer

LONG_TTL_MS = 60_000  # nothing here may be explained by a lease lapsing
BOUND_S = 5.0
_clusters = itertools.count()

Factory = Callable[[int], Awaitable[EtcdCoordinator]]


def info(node_id: int) -> NodeInfo:
    return NodeInfo(node_id, f"http://127.0.0.1:{8100 + node_id}", f"127.0.0.1:{9100 + node_id}", None,
                    f"127.0.0.1:{7100 + node_id}", 1)


async def eventually(predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {BOUND_S} s: {what}")
        await asyncio.sleep(0.02)


@pytest_asyncio.fixture(loop_scope="function")
async def make(etcd_server: EtcdServer) -> AsyncIterator[Factory]:
    cluster = f"witness{next(_clusters)}-{time.monotonic_ns()}"
    started: list[EtcdCoordinator] = []

    async def start(node_id: int) -> EtcdCoordinator:
        coordinator = EtcdCoordinator(parse_etcd_url(etcd_server.url), cluster, info(node_id), LONG_TTL_MS)
        await coordinator.start()
        started.append(coordinator)
        return coordinator

    yield start
    for coordinator in started:
        await coordinator.close()


def probing(outcome: Probe) -> Callable[[str, int], Awaitable[Probe]]:
    async def probe(host: str, port: int) -> Probe:
        return outcome
    return probe


@pytest.mark.asyncio
async def test_two_witnesses_end_a_session_and_one_does_not(make):
    a, b, c = await make(1), await make(2), await make(3)
    await eventually(lambda: all(a.cached_node(n) and b.cached_node(n) for n in (1, 2, 3)), "three nodes")
    await c.close(revoke=False)  # a crash: nothing revokes its lease
    session = a.node_session(3)
    assert session is not None and session.info == info(3)

    assert await a.witness_crash(session) == frozenset({1})
    assert await a.witness_crash(session) == frozenset({1}), "one witness counts once"
    await asyncio.sleep(0.3)
    assert b.cached_node(3) is not None, "one witness alone ends nothing"

    assert await b.witness_crash(session) == frozenset({1, 2})
    assert await b.end_session(session)
    await eventually(lambda: a.cached_node(3) is None and b.cached_node(3) is None, "node 3's session ended")


@pytest.mark.asyncio
async def test_evidence_about_an_earlier_registration_counts_for_nothing(make):
    a, b = await make(1), await make(2)
    await eventually(lambda: a.cached_node(2), "node 2")
    old = a.node_session(2)
    assert old is not None
    await b.close()
    again = await make(2)  # the same id, restarted: a new lease and revision
    await eventually(lambda: (s := a.node_session(2)) is not None and s.lease != old.lease, "node 2 again")
    assert await a.witness_crash(old) is None
    assert again.session_alive() and a.cached_node(2) is not None


@pytest.mark.asyncio
async def test_a_lone_faulty_observer_cannot_evict_a_healthy_node(make):
    a, b, c = await make(1), await make(2), await make(3)
    await eventually(lambda: all(x.cached_node(n) for x in (a, b, c) for n in (1, 2, 3)), "three nodes")
    faulty = CrashWatch(a, probe=probing(Probe.REFUSED))  # e.g. a rejecting firewall on node 1's side
    healthy_looks: list[tuple[str, int]] = []

    async def healthy_probe(host: str, port: int) -> Probe:
        healthy_looks.append((host, port))
        return Probe.ACCEPTED

    heard: list[int] = []
    b.on_crash_witness(heard.append)
    other = CrashWatch(b, probe=healthy_probe)
    b.on_crash_witness(other.departed)
    try:
        faulty.suspect(3)
        await eventually(lambda: heard == [3], "node 2 heard of node 1's witness")
        looks = 3 * LOOKS_ON_EVIDENCE
        await eventually(lambda: len(healthy_looks) == looks, "node 2 looked at node 3's three addresses itself")
        faulty.suspect(3)  # the broken route keeps failing calls: the witness is not written again
        await asyncio.sleep(0.5)
        assert heard == [3] and len(healthy_looks) == looks
        assert faulty.ended == [] and other.ended == []
        assert c.session_alive() and a.cached_node(3) is not None and b.cached_node(3) is not None
    finally:
        await faulty.close()
        await other.close()


@pytest.mark.asyncio
async def test_a_witness_is_confirmed_by_another_node_and_the_session_ends(make):
    a, b, c = await make(1), await make(2), await make(3)
    await eventually(lambda: all(x.cached_node(n) for x in (a, b) for n in (1, 2, 3)), "three nodes")
    await c.close(revoke=False)
    first, second = CrashWatch(a, probe=probing(Probe.REFUSED)), CrashWatch(b, probe=probing(Probe.REFUSED))
    b.on_crash_witness(second.departed)
    try:
        first.suspect(3)
        await eventually(lambda: a.cached_node(3) is None and b.cached_node(3) is None, "node 3's session ended")
        assert second.ended == [3], "the confirming witness ends it"
    finally:
        await first.close()
        await second.close()


@pytest.mark.asyncio
async def test_a_departed_node_is_looked_at_again_while_its_sockets_close(make):
    a, b, c = await make(1), await make(2), await make(3)
    await eventually(lambda: all(x.cached_node(n) for x in (a, b) for n in (1, 2, 3)), "three nodes")
    await c.close(revoke=False)
    probes = 0

    async def closing(host: str, port: int) -> Probe:
        """The first look still finds the ports open (the process is being torn down)."""
        nonlocal probes
        probes += 1
        return Probe.ACCEPTED if probes <= 3 else Probe.REFUSED

    first, second = CrashWatch(a, probe=closing), CrashWatch(b, probe=closing)
    try:
        first.departed(3)  # both saw node 3's connection end, and looked too early
        second.departed(3)
        await eventually(lambda: a.cached_node(3) is None and b.cached_node(3) is None, "node 3's session ended")
        assert probes > 3
    finally:
        await first.close()
        await second.close()
