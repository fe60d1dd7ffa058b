"""Broker nodes in-process on the simulated loop, network and etcd (the first step of the node
layer, ``docs/design/simulation.md``).

``SimCluster`` starts real ``logbroker.node.Node`` objects, one per host ``n1``..``nN``: each with
an ``EtcdCoordinator`` on the in-memory etcd (``client_factory``), its internal RPC in plaintext on
the simulated network, and its data in a directory of its own on the simulated disk
(``sim.disk``: every fsync recorded, so ``disk.crash`` can cut a node's files back to what was
durable). Run it inside ``cluster.world()`` (``sim.world.virtual_world`` with the disk's fsync):
the node still reads the process clocks in places.

``crash_node`` kills a node as a power loss does: its connections reset, its etcd client gone
(the lease lapses, nothing is revoked), its tasks cancelled, its files cut back to what was
durable (``sim.disk``); ``start_node`` on the same id restarts it on what is left.

Not yet: the nodes' HTTP and gRPC listeners (peers probe a silent node's HTTP address and find it
refusing, which the crash watch may take as evidence; the node layer starts the HTTP app too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Iterator
from typing import Final

from coordinator.etcd import EtcdCoordinator
from coordinator.models import NodeInfo
from logbroker.config import NodeConfig
from logbroker.node import Node
from sim.disk import Cut, SimDisk
from sim.etcd import SimEtcd, SimEtcdClient
from sim.loop import SimLoop
from sim.network import SimNetwork
from sim.trace import Trace
from sim.world import virtual_world

CRASH_WAIT_S: Final = 5.0  # for a dead node's cancelled tasks to end
RPC_PORT: Final = 7000
HTTP_PORT: Final = 8080
LEASE_TTL_MS: Final = 2000
CLUSTER: Final = "sim"


class SimCluster:
    def __init__(self, loop: SimLoop, rng: random.Random, trace: Trace, root: str) -> None:
        self.loop = loop
        self.rng = rng
        self.trace = trace
        self.root = root
        self.network = SimNetwork(loop, rng, trace)
        self.etcd = SimEtcd(rng, trace=lambda event: trace.add(loop.time(), event))
        self.disk = SimDisk(rng)
        self.nodes: dict[int, Node] = {}

    @staticmethod
    def host(node_id: int) -> str:
        return f"n{node_id}"

    @contextlib.contextmanager
    def world(self) -> Iterator[None]:
        """The process clocks, ids and fsync, the run's while the cluster runs."""
        with virtual_world(self.loop, self.rng, fsync=self.disk.fsync):
            yield

    def data_dir(self, node_id: int) -> str:
        return os.path.join(self.root, self.host(node_id))

    async def start_node(self, node_id: int) -> Node:
        host = self.host(node_id)
        return await self.network.spawn(host, self._start(node_id, host), name=f"start-{host}")

    async def _start(self, node_id: int, host: str) -> Node:
        http_url = f"http://{host}:{HTTP_PORT}"
        config = NodeConfig(node_id=node_id, data_dir=self.data_dir(node_id), auth="off", rpc_port=RPC_PORT,
                            coordinator="etcd://etcd:2379", advertised_host=host, http_host="0.0.0.0")
        coordinator = EtcdCoordinator(["etcd:2379"], CLUSTER, NodeInfo(node_id, http_url, f"{host}:{RPC_PORT}"),
                                      LEASE_TTL_MS, clock=self.loop.time,
                                      client_factory=SimEtcdClient.factory(self.etcd, host))
        node = Node(config, coordinator=coordinator, http_url=http_url, fsync=self.disk.fsync)
        await node.start(http_url=http_url)
        self.nodes[node_id] = node
        self.trace.add(self.loop.time(), f"{host} started")
        return node

    async def stop_node(self, node_id: int) -> None:
        node = self.nodes.pop(node_id)
        await self.network.spawn(self.host(node_id), node.stop(), name=f"stop-n{node_id}")
        self.trace.add(self.loop.time(), f"{self.host(node_id)} stopped")

    async def crash_node(self, node_id: int, *, tear: bool = True) -> list[Cut]:
        """Kill node ``node_id`` with no chance to clean up; the files it had cut (see above)."""
        host, directory = self.host(node_id), self.data_dir(node_id)
        self.nodes.pop(node_id)
        self.disk.fail_fsync(directory)  # the dead process makes nothing durable any more
        cuts = self.disk.crash(directory, tear=tear)
        self.network.crash(host)
        self.etcd.crash(host)
        tasks = self.loop.tasks_of(host)
        assert asyncio.current_task() not in tasks, "a node cannot crash itself from its own task"
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CRASH_WAIT_S)
        self.disk.crash(directory, tear=False)  # whatever its cancelled code still wrote is gone
        self.disk.heal_fsync(directory)
        self.trace.add(self.loop.time(), f"{host} crashed: {len(cuts)} files cut, {len(tasks)} tasks ended")
        return cuts

    async def stop(self) -> None:
        for node_id in sorted(self.nodes):
            await self.stop_node(node_id)
