"""``EtcdSession`` against a scripted etcd client on a manual clock: what the session decides
when a lease grant is slow (decision 0382). The session against a real etcd is in
``test_etcd.py``."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import pytest

from coordinator.errors import CoordinatorUnavailableError
from coordinator.etcd_client import EtcdClient
from coordinator.etcd_session import EtcdSession
from coordinator.models import NodeInfo

TTL_S = 2


@dataclasses.dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Answer:
    succeeded: bool = True


class ScriptedEtcd:
    """Grants lease 7 after ``grant_s`` on the clock; a keepalive answers ``keepalive_ttl``."""

    def __init__(self, clock: Clock, grant_s: float, keepalive_ttl: int = TTL_S) -> None:
        self.clock, self.grant_s, self.keepalive_ttl = clock, grant_s, keepalive_ttl
        self.calls: list[str] = []

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        self.calls.append("grant")
        self.clock.now += self.grant_s
        return 7, ttl_s

    async def txn(self, compare: Any, success: Any, failure: Any = ()) -> Answer:
        self.calls.append("txn")
        return Answer()

    async def keepalive(self, lease_id: int, timeout_s: float) -> int:
        self.calls.append(f"keepalive {lease_id}")
        return self.keepalive_ttl

    async def revoke(self, lease_id: int, timeout_s: float | None = None) -> None:
        self.calls.append(f"revoke {lease_id}")

    def reconnect(self) -> None:
        self.calls.append("reconnect")


def session(etcd: ScriptedEtcd, clock: Clock, lost: list[str]) -> EtcdSession:
    node = NodeInfo(1, "http://127.0.0.1:8001", "127.0.0.1:9001", None, "127.0.0.1:7001", 1)
    return EtcdSession(cast(EtcdClient, etcd), "/test/", node, TTL_S, clock, lambda: lost.append("lost"),
                       on_reopened=lambda: lost.append("reopened"))


@pytest.mark.asyncio
async def test_a_quick_grant_is_valid_from_its_send_time_without_a_keepalive():
    clock = Clock()
    etcd, lost = ScriptedEtcd(clock, grant_s=0.1), []
    s = session(etcd, clock, lost)
    await s.open(first=True)
    assert etcd.calls == ["grant", "txn"]
    assert s.alive() and s.valid_until() == pytest.approx(100.0 + TTL_S - TTL_S / 4)
    await asyncio.sleep(0)
    assert not lost


@pytest.mark.asyncio
async def test_a_grant_slower_than_the_lease_is_proved_by_one_keepalive_not_lost_at_once():
    """A channel reconnecting after a cut can take longer to grant than the TTL minus margin:
    the lease is live in etcd, but nothing proves it from the send time. Before, the session
    was declared lost the moment it opened and a new lease granted after a backoff."""
    clock = Clock()
    etcd, lost = ScriptedEtcd(clock, grant_s=1.8), []
    s = session(etcd, clock, lost)
    await s.open(first=False)
    assert etcd.calls == ["grant", "txn", "keepalive 7"]
    assert s.alive() and s.valid_until() == pytest.approx(101.8 + TTL_S - TTL_S / 4)
    await asyncio.sleep(0.01)
    assert lost == ["reopened"] and s.lease == 7


@pytest.mark.asyncio
async def test_a_lease_that_expired_while_it_was_granted_fails_the_open():
    clock = Clock()
    etcd, lost = ScriptedEtcd(clock, grant_s=2.5, keepalive_ttl=0), []
    s = session(etcd, clock, lost)
    with pytest.raises(CoordinatorUnavailableError):
        await s.open(first=False)
    assert s.lease is None and not s.alive()


@pytest.mark.asyncio
async def test_a_session_opened_again_says_so_and_a_first_open_does_not():
    """A node whose session came back may stand for leadership again: the reconciler hears it
    (as a change of the node set) rather than waiting for its next full pass."""
    clock = Clock()
    etcd, events = ScriptedEtcd(clock, grant_s=0.1), []
    s = session(etcd, clock, events)
    await s.open(first=True)
    assert events == []
    await s.open(first=False)
    assert events == ["reopened"]


class GoneOnce(ScriptedEtcd):
    """etcd says the lease is gone at the first keepalive, and keeps the next one."""

    async def keepalive(self, lease_id: int, timeout_s: float) -> int:
        first = not any(call.startswith("keepalive") for call in self.calls)
        await super().keepalive(lease_id, timeout_s)
        return 0 if first else TTL_S


@pytest.mark.asyncio
async def test_a_lost_session_moves_to_a_new_connection_before_it_is_granted_again():
    """The connection that carried a session through a network cut can stay silent for seconds
    after the cut heals (both ends' retransmission timers backed off): the session that was
    lost is granted again on a new one."""
    clock = Clock()
    etcd, events = GoneOnce(clock, grant_s=0.1), []
    s = session(etcd, clock, events)
    await s.open(first=True)
    s.start()
    try:
        for _ in range(200):
            if "grant" in etcd.calls[3:]:
                break
            await asyncio.sleep(0.01)
    finally:
        await s.close(revoke=False, timeout_s=1.0)
    assert etcd.calls[:5] == ["grant", "txn", "keepalive 7", "reconnect", "grant"]
    assert events[0] == "lost"
