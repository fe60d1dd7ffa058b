"""One seeded schedule over the simulation's layers, and a batch of them.

A schedule (``run_seed``): two hosts, ``n1`` and ``n2``, each with the broker's real internal RPC
server and a real client calling the other, and each with the real ``EtcdCoordinator`` session
against the in-memory etcd, on the coordinator's clock = the loop's. A nemesis draws a fault every
``FAULT_GAP_S``: cut or heal the link, reset its connections, cut a node from etcd, stop etcd;
after ``Options.faults_s`` it heals everything. Every choice comes from ``random.Random(seed)``.

Invariants (a broken one fails the seed, naming it):

- ``rpc-answer``: a call is answered with exactly what it sent, by the node it called;
- ``rpc-partition``: no call succeeds when the link was cut for the whole of it;
- ``lease-fence``: whenever a node's coordinator says its session is alive, etcd still holds that
  lease (the node never believes a lease etcd may already have expired: the fencing rule the
  write path rests on);
- ``recovery``: ``RECOVER_S`` after the last heal, calls succeed both ways, both sessions are
  alive and each coordinator lists both nodes;
- ``loop-errors``: nothing reached the loop's exception handler but asyncio's own stream futures
  dropped with the network's error at garbage collection (``is_stream_noise``): a future the broker
  made and failed without anyone awaiting it is a defect (an error logged for nothing).

The trace holds the faults, each call's outcome, session changes, and the network's connection
events, with their virtual times; its sha256 identifies the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import random
from typing import Any, Final

from coordinator.etcd import EtcdCoordinator
from coordinator.models import MetadataChange, NodeInfo
from internal_rpc.client import RpcClient
from internal_rpc.errors import RpcCallError
from internal_rpc.server import RpcServer
from sim.etcd import SimEtcd, SimEtcdClient
from sim.loop import SimError, SimLoop
from sim.loop import run as run_loop
from sim.network import SimNetwork
from sim.trace import Judged, Trace

HOSTS: Final = ("n1", "n2")
RPC_PORT: Final = 7000
LEASE_TTL_MS: Final = 2000
CALL_DEADLINE_S: Final = 1.0
CALL_GAP_S: Final = (0.05, 0.5)
FAULT_GAP_S: Final = (0.5, 6.0)
RECOVER_S: Final = 30.0
CHECK_EVERY_S: Final = 0.1
CLUSTER: Final = "sim"


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    faults_s: float = 60.0  # virtual seconds under faults


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    seed: int
    trace: str  # sha256 of the event trace
    events: int
    failures: tuple[str, ...]
    virtual_s: float
    tail: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.failures


class _Schedule(Judged):
    def __init__(self, seed: int, options: Options, loop: SimLoop) -> None:
        self.rng = random.Random(seed)
        self.options = options
        self.loop = loop
        self.trace = Trace()
        self.network = SimNetwork(loop, self.rng, self.trace)
        self.etcd = SimEtcd(self.rng, trace=self.event)
        self.failures: list[str] = []
        self.coordinators: dict[str, EtcdCoordinator] = {}
        self.clients: dict[str, RpcClient] = {}
        self.servers: dict[str, RpcServer] = {}
        self.cut_since: float | None = None  # when the n1-n2 link was last cut (None: whole)
        self.running = True

    # ---- the nodes --------------------------------------------------------------------------------

    async def start_node(self, host: str) -> None:
        node_id = HOSTS.index(host) + 1

        async def echo(request: dict[str, Any]) -> dict[str, Any]:
            await asyncio.sleep(self.rng.uniform(0.0, 0.02))
            return {"from": host, "echo": request}

        server = RpcServer("0.0.0.0", RPC_PORT, {"Sim": {"echo": echo}}, tls=None, cluster_token="sim")
        await server.start()
        self.servers[host] = server
        other = HOSTS[1 - HOSTS.index(host)]
        self.clients[host] = RpcClient(f"{other}:{RPC_PORT}", tls=None, cluster_token="sim",
                                       deadline_s=CALL_DEADLINE_S, node_id=node_id)
        info = NodeInfo(node_id, f"http://{host}:8080", f"{host}:{RPC_PORT}")
        coordinator = EtcdCoordinator(["etcd:2379"], CLUSTER, info, LEASE_TTL_MS, clock=self.loop.time,
                                      client_factory=SimEtcdClient.factory(self.etcd, host))
        coordinator.on_change(lambda change: self._changed(host, change))
        await coordinator.start()
        self.coordinators[host] = coordinator
        self.event(f"{host} started")

    def _changed(self, host: str, change: MetadataChange) -> None:
        if change.session_lost:
            self.event(f"{host} session lost")

    async def caller(self, host: str) -> None:
        client, other = self.clients[host], HOSTS[1 - HOSTS.index(host)]
        sequence = 0
        while self.running:
            sequence += 1
            started, cut_at_start = self.loop.time(), self.cut_since
            try:
                answer = await client.call("Sim", "echo", {"n": sequence, "by": host})
            except RpcCallError as exc:
                self.event(f"{host} call {sequence} {exc.status.value}")
            else:
                self.event(f"{host} call {sequence} ok")
                if answer != {"from": other, "echo": {"n": sequence, "by": host}}:
                    self.fail("rpc-answer", f"{host} call {sequence} answered {answer!r}")
                if cut_at_start is not None and self.cut_since == cut_at_start and cut_at_start <= started:
                    self.fail("rpc-partition", f"{host} call {sequence} succeeded across a cut (cut at "
                                               f"{cut_at_start:.3f}, call {started:.3f}..{self.loop.time():.3f})")
            await asyncio.sleep(self.rng.uniform(*CALL_GAP_S))

    # ---- faults and checks ------------------------------------------------------------------------

    def cut(self) -> None:
        if self.cut_since is None:
            self.cut_since = self.loop.time()
            self.network.cut(*HOSTS)

    def heal(self) -> None:
        if self.cut_since is not None:
            self.cut_since = None
            self.network.heal(*HOSTS)

    async def nemesis(self) -> None:
        end = self.loop.time() + self.options.faults_s
        while self.loop.time() < end:
            await asyncio.sleep(self.rng.uniform(*FAULT_GAP_S))
            fault = self.rng.choice(("cut", "heal", "reset", "isolate", "rejoin", "etcd-stop", "etcd-start", "none"))
            host = self.rng.choice(HOSTS)
            if fault == "cut":
                self.cut()
            elif fault == "heal":
                self.heal()
            elif fault == "reset":
                self.network.reset(*HOSTS)
            elif fault == "isolate":
                self.etcd.isolate(host)
            elif fault == "rejoin":
                self.etcd.rejoin(host)
            elif fault == "etcd-stop":
                self.etcd.stop()
            elif fault == "etcd-start":
                self.etcd.start()
        self.heal()
        for host in HOSTS:
            self.etcd.rejoin(host)
        self.etcd.start()
        self.event("healed")

    async def fence_checker(self) -> None:
        alive = dict.fromkeys(HOSTS, True)
        while self.running:
            for host in HOSTS:
                coordinator = self.coordinators[host]
                now_alive = coordinator.session_alive()
                if now_alive != alive[host]:
                    alive[host] = now_alive
                    self.event(f"{host} session {'alive' if now_alive else 'not alive'}")
                lease = getattr(coordinator, "_session", None)
                lease_id = lease.lease if lease is not None else None
                if now_alive and (lease_id is None or not self.etcd.holds_lease(lease_id)):
                    self.fail("lease-fence", f"{host} believes lease {lease_id} valid until "
                                             f"{coordinator.lease_valid_until():.3f}; etcd no longer holds it")
            await asyncio.sleep(CHECK_EVERY_S)

    async def recovered(self) -> None:
        deadline = self.loop.time() + RECOVER_S
        missing: list[str] = []
        while self.loop.time() < deadline:
            missing = []
            for host in HOSTS:
                coordinator = self.coordinators[host]
                if not coordinator.session_alive():
                    missing.append(f"{host} session not alive")
                elif sorted(n.node_id for n in await coordinator.nodes()) != [1, 2]:
                    missing.append(f"{host} does not list both nodes")
                try:
                    await self.clients[host].call("Sim", "echo", {"n": 0, "by": host})
                except RpcCallError as exc:
                    missing.append(f"{host} cannot call: {exc.status.value}")
            if not missing:
                self.event("recovered")
                return
            await asyncio.sleep(0.5)
        self.fail("recovery", f"{RECOVER_S:g} s after the heal: {'; '.join(missing)}")

    async def main(self) -> None:
        for host in HOSTS:
            await self.network.spawn(host, self.start_node(host))
        tasks = [self.network.spawn(host, self.caller(host), name=f"caller-{host}") for host in HOSTS]
        tasks.append(self.loop.create_task(self.fence_checker(), name="fence-checker"))
        await self.nemesis()
        await self.recovered()
        self.running = False
        await asyncio.gather(*tasks)
        for host in HOSTS:
            await self.network.spawn(host, self.stop_node(host))
        self.event("stopped")

    async def stop_node(self, host: str) -> None:
        await self.clients[host].close()
        await self.servers[host].close()
        await self.coordinators[host].close()


def is_stream_noise(message: str, exc: BaseException | None) -> bool:
    """asyncio's own reports that are no defect of the broker: the stream protocol keeps its
    connection's error in a future only its finaliser marks as seen (the garbage collector may free
    the future first), and Python 3.11's ``start_server`` callback asks a cancelled connection task
    for its exception (a crashed node's tasks are cancelled). Both happen over real sockets too."""
    if message == "Future exception was never retrieved":
        return type(exc) in (ConnectionResetError, TimeoutError)
    return message.startswith("Exception in callback StreamReaderProtocol.connection_made") and \
        isinstance(exc, asyncio.CancelledError)


def run_seed(seed: int, options: Options = Options()) -> Outcome:
    """Run one schedule; the same seed gives the same trace (and hash) every time."""
    loop = SimLoop()
    schedule = _Schedule(seed, options, loop)
    try:
        run_loop(schedule.main(), loop=loop)
    except SimError as exc:
        schedule.fail("simulation", f"{type(exc).__name__}: {exc}")
    gc.collect()
    errors = [f"{message}: {exc!r}" for message, exc in loop.errors if not is_stream_noise(message, exc)]
    if errors:
        schedule.failures.append(f"loop-errors: {errors[0]}" + (f" (and {len(errors) - 1} more)" if errors[1:] else ""))
    return Outcome(seed, schedule.trace.digest(), schedule.trace.count, tuple(schedule.failures),
                   loop.time() - loop._start_s, tuple(schedule.trace.tail))


def quiet() -> None:
    """The broker's logs (session lost, keepalive failed: the faults we caused) stay out of the
    output; only failures and the summary are printed."""
    logging.getLogger().setLevel(logging.CRITICAL)
