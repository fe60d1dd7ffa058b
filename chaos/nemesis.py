"""The nemesis: one fault at a time, held for a random time, then healed, with a random quiet pause
between faults, until ``stop`` is set. Faults are dealt from a shuffled deck holding each kind
once (seeded), so every kind comes up within one round of the deck. Each fault is recorded as a
``fault`` ``start`` and ``end`` event (``fault``, ``target``).

Faults: ``kill_leader``/``kill_follower`` (SIGKILL, then a restart on the same data dir) and
``pause_leader``/``pause_follower`` (SIGSTOP, then SIGCONT; up to 2.5 lease TTLs, so often past
the lease) of a data partition's leader or of another of its replicas; ``etcd_kill`` (SIGKILL,
restart on the same data dir). With a ``Network``, of a leader: ``isolate`` (its link down),
``cut_etcd``, ``cut_peers``, ``cut_clients`` (from etcd, from its followers, from the clients)
and ``halves`` (etcd and that node on one side, the other nodes on the other). With slow disks
(``chaos.slow_disk``): ``slow_disk`` (every fsync of a leader takes ``SLOW_FSYNC_MS`` longer).
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable
from typing import Final

from chaos.cluster import LEASE_TTL_MS, ChaosCluster
from chaos.history import History, say
from chaos.network import CLIENTS, ETCD, Network

PROCESS_FAULTS: Final = ("kill_leader", "kill_follower", "pause_leader", "pause_follower", "etcd_kill")
NETWORK_FAULTS: Final = ("isolate", "cut_etcd", "cut_peers", "cut_clients", "halves")
DISK_FAULTS: Final = ("slow_disk",)
SLOW_FSYNC_MS: Final = (200, 500)
FAULT_S: Final = (0.5, 2.5 * LEASE_TTL_MS / 1000)
QUIET_S: Final = (0.5, 2.0)


class Nemesis:
    def __init__(self, cluster: ChaosCluster, history: History, leaders: Callable[[], dict[str, tuple[int, int]]],
                 topic: str, *, seed: int, network: Network | None = None) -> None:
        self.cluster, self.history, self.leaders, self.topic = cluster, history, leaders, topic
        self.network = network
        self.random = random.Random(seed)
        self.faults = (PROCESS_FAULTS + (NETWORK_FAULTS if network is not None else ())
                       + (DISK_FAULTS if cluster.slow_disks is not None else ()))
        self.stop = asyncio.Event()
        self.counts: dict[str, int] = {}
        self._deck: list[str] = []

    def _deal(self) -> str:
        if not self._deck:
            self._deck = list(self.faults)
            self.random.shuffle(self._deck)
        return self._deck.pop()

    def _target(self, fault: str) -> int:
        """The leader of a random data partition, or (``*_follower``) another node; any node
        while no leader is known."""
        led = [leader for key, (leader, _) in sorted(self.leaders().items())
               if key.startswith(self.topic + "/") and leader in self.cluster.node_ids]
        if not led:
            return self.random.choice(self.cluster.node_ids)
        leader = self.random.choice(led)
        if fault.endswith("_follower"):
            return self.random.choice([n for n in self.cluster.node_ids if n != leader])
        return leader

    async def _hold(self) -> None:
        await asyncio.sleep(self.random.uniform(*FAULT_S))

    async def run(self) -> None:
        while not self.stop.is_set():
            await self._restart_dead()
            try:
                await asyncio.wait_for(self.stop.wait(), self.random.uniform(*QUIET_S))
                break
            except TimeoutError:
                pass
            await self.inject(self._deal())
        await self.heal()

    async def inject(self, fault: str) -> None:
        node = self._target(fault)
        target = ETCD if fault == "etcd_kill" else f"node-{node}"
        self.history.add("fault", "start", "nemesis", fault=fault, target=target)
        say(f"{self.history.now():7.1f} s  {fault} {target}")
        self.counts[fault] = self.counts.get(fault, 0) + 1
        try:
            if fault.startswith("kill_"):
                await asyncio.to_thread(self.cluster.kill_node, node)
                await self._hold()
                await asyncio.to_thread(self.cluster.start_node, node)
            elif fault.startswith("pause_"):
                self.cluster.pause(target)
                await self._hold()
                self.cluster.resume(target)
            elif fault == "slow_disk":
                assert self.cluster.slow_disks is not None
                self.cluster.slow_disks.slow(target, self.random.randint(*SLOW_FSYNC_MS))
                await self._hold()
                self.cluster.slow_disks.heal(target)
            elif fault == "etcd_kill":
                await asyncio.to_thread(self.cluster.kill_etcd)
                await self._hold()
                await asyncio.to_thread(self.cluster.restart_etcd)
            else:
                await self._cut(fault, node)
        except Exception as exc:  # a failed step is recorded; the next round restarts what is down
            self.history.add("fault", "error", "nemesis", fault=fault, target=target, error=repr(exc)[:300])
            say(f"{fault} {target} failed: {exc!r}")
        self.history.add("fault", "end", "nemesis", fault=fault, target=target)

    async def _cut(self, fault: str, node: int) -> None:
        assert self.network is not None
        me = f"node-{node}"
        others = [f"node-{n}" for n in self.cluster.node_ids if n != node]
        if fault == "isolate":
            self.network.isolate(me)
        elif fault == "cut_etcd":
            self.network.cut(me, ETCD)
        elif fault == "cut_peers":
            for other in others:
                self.network.cut(me, other)
        elif fault == "cut_clients":
            self.network.cut(me, CLIENTS)
        elif fault == "halves":
            for other in others:
                self.network.cut(me, other)
                self.network.cut(ETCD, other)
        await self._hold()
        self.network.heal()

    async def _restart_dead(self) -> None:
        if self.cluster.etcd.proc is None or self.cluster.etcd.proc.poll() is not None:
            await self._attempt("etcd", self.cluster.restart_etcd)
        for node in self.cluster.node_ids:
            if not self.cluster.alive(node):
                await self._attempt(f"node-{node}", functools.partial(self.cluster.start_node, node))

    async def _attempt(self, target: str, start: Callable[[], None]) -> None:
        try:
            await asyncio.to_thread(start)
        except Exception as exc:
            self.history.add("fault", "error", "nemesis", fault="restart", target=target, error=repr(exc)[:300])

    async def heal(self) -> None:
        """Everything up, resumed and connected again."""
        if self.network is not None:
            self.network.heal()
        if self.cluster.slow_disks is not None:
            self.cluster.slow_disks.heal()
        for member in list(self.cluster.paused):
            self.cluster.resume(member)
        await self._restart_dead()
