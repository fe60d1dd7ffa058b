"""One seeded schedule over three real broker nodes (``SimCluster``), checked with the chaos
harness's own history checker: the default schedule of ``python -m sim``.

A schedule (``run_cluster_seed``): three nodes ``n1``..``n3`` start; a topic of ``PARTITIONS``
partitions with three replicas is created (``min_insync_replicas`` 2, the default). Writers send
one record at a time with ``acks=all`` through a node they pick (forwarded to the leader), a reader
follows every partition through a node it picks, each recording the chaos harness's events
(``chaos.history``: ``produce`` invoke/ok/fail/info, ``read`` ok). Beside them, queue senders and
receivers (``sim.queue_workload``) and consumer-group members with an observer of their committed
offsets (``sim.group_workload``). A nemesis draws a fault every
``FAULT_GAP_S`` for ``ClusterOptions.faults_s`` of virtual time: cut a link, cut a node from both
others, heal, reset a link's connections, cut a node from etcd or let it back, stop or start etcd,
kill a node (its unsynced tail cut, torn at a seeded point), kill the leader of the partition that
acknowledges the next write the moment it does, or restart the killed node on what its disk kept
(one node at most is down). Then everything heals, the killed node restarts, the writers stop,
and the cluster settles: within ``SETTLE_S`` every node has its session and sees the same leader,
epoch and ISR, the leader leads at that epoch, the ISR holds all three replicas, and every
replica's log is as long as the leader's high watermark.

Invariants (a broken one fails the seed, naming it):

- the chaos checker's (``chaos.checker.check``): no acknowledged write ``lost`` or ``misplaced``,
  none ``duplicated``, one writer's records of a partition in the order acknowledged
  (``reordered``), every replica equal to the log below the high watermark
  (``replica_conflicts``), nothing a reader got that the final log does not hold (``dirty_reads``),
  no acknowledged queue message never delivered once the queue is drained (``queue_lost``) or
  delivered after its ack (``queue_redelivered_after_ack``), no committed offset going backwards
  (``commit_regressions``); ``queue-drain``: the queue was not drained after the heal;
- ``settle``: the cluster converged as above after the heal;
- ``unexpected-error``: a call of the workload raised anything but the broker's typed errors, a
  timeout, or the cancellation of a killed node's call;
- ``loop-errors``: as in ``sim.run``.

The final log is read through the cluster (each partition's leader, up to its high watermark);
each node's own copy straight from its replica's log. The trace holds the faults, the network's,
etcd's and the nodes' events and every workload outcome, with their virtual times.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Coroutine
from typing import Any, Final

from chaos.checker import check
from chaos.history import Event
from logbroker.cluster_groups import ensure_offsets_topic
from logbroker.errors import BrokerError
from logbroker.node import Node
from logbroker.records import IncomingRecord
from segments.batch import ProducerRecord, decode_records, iter_batches
from segments.errors import OffsetOutOfRangeError
from segments.log import LogRead
from sim.cluster import SimCluster
from sim.group_workload import GroupWorkload
from sim.loop import SimError, SimLoop
from sim.loop import run as run_loop
from sim.queue_workload import QueueWorkload, queue_spec
from sim.run import Outcome, is_stream_noise
from sim.trace import Judged, Trace

NODES: Final = (1, 2, 3)
TOPIC: Final = "t"
PARTITIONS: Final = 2
WRITERS: Final = 3
QUEUE_SENDERS: Final = 2
QUEUE_RECEIVERS: Final = 2
GROUP_MEMBERS: Final = 2
WRITE_GAP_S: Final = (0.05, 0.4)
READ_GAP_S: Final = (0.2, 1.0)
FAULT_GAP_S: Final = (0.5, 4.0)
CALL_TIMEOUT_S: Final = 15.0  # a workload call that outlasts it counts as unknown
SETTLE_S: Final = 60.0
SETTLE_POLL_S: Final = 0.5
READ_BYTES: Final = 1 << 20
TMP_ROOTS: Final = ("/dev/shm",)  # where the nodes' files go when it exists (memory: no disk I/O)
FAULTS: Final = ("cut", "isolate", "heal", "reset", "etcd-isolate", "etcd-rejoin", "etcd-stop", "etcd-start",
                 "crash", "kill-leader", "restart", "none")
ACK_WAIT_S: Final = 5.0  # how long ``kill-leader`` waits for an acknowledgement


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterOptions:
    faults_s: float = 20.0  # virtual seconds under faults


class _ClusterSchedule(Judged):
    def __init__(self, seed: int, options: ClusterOptions, loop: SimLoop, root: str) -> None:
        self.rng = random.Random(seed)
        self.options = options
        self.loop = loop
        self.trace = Trace()
        self.cluster = SimCluster(loop, self.rng, self.trace, root)
        self.events: list[Event] = []
        self.failures: list[str] = []
        self.down: set[int] = set()
        self.ack_watch: asyncio.Future[int] | None = None  # kill-leader: the next acknowledged partition
        self.writing = True
        self.reading = True
        self.queue = QueueWorkload(self)
        self.group = GroupWorkload(self, TOPIC)

    def record(self, f: str, type_: str, process: str, **fields: Any) -> Event:
        event: Event = {"f": f, "type": type_, "process": process, "time": round(self.loop.time(), 6), **fields}
        self.events.append(event)
        return event

    def alive(self) -> list[int]:
        return [n for n in NODES if n not in self.down and n in self.cluster.nodes]

    def nodes(self) -> dict[int, Node]:
        return self.cluster.nodes

    async def call(self, node_id: int, what: str, method: Callable[..., Coroutine[Any, Any, Any]],
                   *args: Any) -> tuple[str, Any]:
        """Run ``method(node, *args)`` as code on node ``node_id``; ``("ok", answer)``, ``("fail", error
        code)`` for the broker's typed refusal, or ``("info", why)`` when the outcome is unknown."""
        node = self.cluster.nodes.get(node_id)
        if node is None:  # it died since the caller picked it: the call is never made
            return "fail", "node_down"
        task = self.cluster.network.spawn(self.cluster.host(node_id), method(node, *args), name=what)
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                return "ok", await task
        except BrokerError as exc:
            return "fail", exc.code
        except OffsetOutOfRangeError:  # read from a replica whose high watermark is behind the reader
            return "fail", "offset_out_of_range"
        except TimeoutError:
            return "info", "timeout"
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            return "info", "node killed"  # the node died under the call: its task was cancelled
        except Exception as exc:  # anything else is a defect of the broker
            self.fail("unexpected-error", f"{what} via n{node_id}: {type(exc).__name__}: {exc}")
            return "info", type(exc).__name__

    # ---- the workload -------------------------------------------------------------------------------

    async def writer(self, name: str) -> None:
        seq = 0
        while self.writing:
            alive = self.alive()
            if alive:
                seq += 1
                via, partition, value = self.rng.choice(alive), self.rng.randrange(PARTITIONS), f"{name}-{seq}"
                self.record("produce", "invoke", name, value=value, partition=partition, seq=seq)
                records = [IncomingRecord(ProducerRecord(value.encode()), partition)]
                kind, answer = await self.call(via, f"produce-{value}", _produce, TOPIC, records, "all")
                if kind == "ok":
                    offset = answer[0]["offset"]
                    self.record("produce", "ok", name, value=value, partition=partition, offset=offset)
                    self.event(f"{name} {value} p{partition} via n{via} ok @{offset}")
                    if self.ack_watch is not None and not self.ack_watch.done():
                        self.ack_watch.set_result(partition)
                else:
                    self.record("produce", kind, name, value=value, partition=partition, error=answer)
                    self.event(f"{name} {value} p{partition} via n{via} {kind} {answer}")
            await asyncio.sleep(self.rng.uniform(*WRITE_GAP_S))

    async def reader(self) -> None:
        positions = dict.fromkeys(range(PARTITIONS), 0)
        while self.reading:
            alive = self.alive()
            if alive:
                via, partition = self.rng.choice(alive), self.rng.randrange(PARTITIONS)
                start = positions[partition]
                kind, answer = await self.call(via, f"read-p{partition}", _fetch, TOPIC, partition, start,
                                               READ_BYTES, 0)
                if kind == "ok":
                    read, _ = answer
                    got = [(o, v) for o, v in sorted(decode_log(read.data).items()) if o >= start]
                    if got:
                        self.record("read", "ok", "reader", partition=partition, records=[list(r) for r in got])
                        positions[partition] = got[-1][0] + 1
                    self.event(f"reader p{partition}@{start} via n{via} got {len(got)}")
                else:
                    self.event(f"reader p{partition}@{start} via n{via} {kind} {answer}")
            await asyncio.sleep(self.rng.uniform(*READ_GAP_S))

    # ---- the nemesis ------------------------------------------------------------------------------

    async def crash(self, node_id: int) -> None:
        self.down.add(node_id)
        await self.cluster.crash_node(node_id, tear=self.rng.random() < 0.5)

    async def restart(self, node_id: int) -> None:
        try:
            await self.cluster.start_node(node_id)
        except Exception as exc:  # a node that cannot restart on its own disk is a defect
            self.fail("restart", f"n{node_id} did not start: {type(exc).__name__}: {exc}")
            raise
        self.down.discard(node_id)

    async def kill_leader(self) -> None:
        """Kill the leader of the partition that next acknowledges a write, the moment it does
        (what the followers lack then is what an early acknowledgement would lose)."""
        self.ack_watch = self.loop.create_future()
        try:
            async with asyncio.timeout(ACK_WAIT_S):
                partition = await self.ack_watch
        except TimeoutError:
            return
        finally:
            self.ack_watch = None
        views = [node.coordinator.cached_partition(TOPIC, partition) for _, node in sorted(self.cluster.nodes.items())]
        leaders = sorted({v.leader for v in views if v is not None and v.leader in self.cluster.nodes})
        if leaders:
            self.event(f"kill the leader of p{partition}: n{leaders[0]}")
            await self.crash(leaders[0])

    async def nemesis(self) -> None:
        network, etcd, host = self.cluster.network, self.cluster.etcd, self.cluster.host
        end = self.loop.time() + self.options.faults_s
        while self.loop.time() < end:
            await asyncio.sleep(self.rng.uniform(*FAULT_GAP_S))
            fault = self.rng.choice(FAULTS)
            a, b = self.rng.sample(NODES, 2)
            if fault == "cut":
                network.cut(host(a), host(b))
            elif fault == "isolate":
                for other in NODES:
                    network.cut(host(a), host(other))
            elif fault == "heal":
                network.heal_all()
            elif fault == "reset":
                network.reset(host(a), host(b))
            elif fault == "etcd-isolate":
                etcd.isolate(host(a))
            elif fault == "etcd-rejoin":
                etcd.rejoin(host(a))
            elif fault == "etcd-stop":
                etcd.stop()
            elif fault == "etcd-start":
                etcd.start()
            elif fault == "crash" and not self.down:
                await self.crash(a)
            elif fault == "kill-leader" and not self.down:
                await self.kill_leader()
            elif fault == "restart" and self.down and etcd.reachable(host(min(self.down))):
                await self.restart(min(self.down))  # a node starts only with etcd in reach (5 s)
        network.heal_all()
        for node_id in NODES:
            etcd.rejoin(host(node_id))
        etcd.start()
        for node_id in sorted(self.down):
            await self.restart(node_id)
        self.event("healed")

    # ---- settling and the final state --------------------------------------------------------------

    def converged(self) -> list[str]:
        """What still keeps the cluster from its settled state (empty: settled)."""
        missing = [f"n{n}: no session" for n, node in sorted(self.cluster.nodes.items())
                   if not node.coordinator.session_alive()]
        for partition in range(PARTITIONS):
            views = {n: node.coordinator.cached_partition(TOPIC, partition) for n, node in self.cluster.nodes.items()}
            states = {(s.leader, s.leader_epoch, tuple(sorted(s.isr))) if s else None for s in views.values()}
            if len(states) != 1 or None in states:
                missing.append(f"p{partition}: the nodes see {sorted(map(str, states))}")
                continue
            leader, epoch, isr = next(iter(states))  # type: ignore[misc]
            if leader not in self.cluster.nodes or isr != NODES:
                missing.append(f"p{partition}: leader {leader}, ISR {isr}")
                continue
            leadership = self.cluster.nodes[leader].replication.leadership(TOPIC, partition)
            if leadership is None or leadership.closed or leadership.epoch != epoch:
                missing.append(f"p{partition}: n{leader} does not lead it at epoch {epoch} yet")
                continue
            hwm = self.cluster.nodes[leader].reads.local_high_watermark(TOPIC, partition)
            ends = {n: node.replicas.get(TOPIC, partition).log.log_end_offset for n, node in self.cluster.nodes.items()}
            if hwm is None or any(end != hwm for end in ends.values()):
                missing.append(f"p{partition}: high watermark {hwm}, log ends {ends}")
        return missing

    async def settle(self) -> bool:
        deadline = self.loop.time() + SETTLE_S
        missing: list[str] = []
        while self.loop.time() < deadline:
            missing = self.converged()
            if not missing:
                self.event("settled")
                return True
            await asyncio.sleep(SETTLE_POLL_S)
        self.fail("settle", f"{SETTLE_S:g} s after the heal: {'; '.join(missing)}")
        return False

    async def final_log(self) -> dict[int, dict[int, str]]:
        log: dict[int, dict[int, str]] = {}
        for partition in range(PARTITIONS):
            records: dict[int, str] = {}
            leader = self.cluster.nodes[NODES[0]].coordinator.cached_partition(TOPIC, partition)
            via = leader.leader if leader is not None and leader.leader in self.cluster.nodes else NODES[0]
            while True:
                start = max(records, default=-1) + 1
                kind, answer = await self.call(via, f"final-p{partition}", _fetch, TOPIC, partition, start,
                                               READ_BYTES, 0)
                if kind != "ok":
                    self.fail("settle", f"the final read of p{partition} via n{via} failed: {answer}")
                    break
                read, hwm = answer
                records.update(decode_log(read.data))
                if read.next_offset >= hwm or not read.data:
                    break
            log[partition] = {o: v for o, v in records.items()}
        return log

    def replica_copies(self) -> dict[str, dict[int, dict[int, str]]]:
        copies: dict[str, dict[int, dict[int, str]]] = {}
        for node_id, node in sorted(self.cluster.nodes.items()):
            copy: dict[int, dict[int, str]] = {}
            for partition in range(PARTITIONS):
                log = node.replicas.get(TOPIC, partition).log
                records: dict[int, str] = {}
                offset = log.log_start_offset
                while offset < log.log_end_offset:
                    read = log.read(offset, READ_BYTES)
                    records.update(decode_log(read.data))
                    if read.next_offset <= offset:
                        break
                    offset = read.next_offset
                copy[partition] = records
            copies[f"n{node_id}"] = copy
        return copies

    def judge(self, log: dict[int, dict[int, str]], replicas: dict[str, dict[int, dict[int, str]]],
              end: float, queue_drained: bool) -> None:
        result = check(self.events, log, replicas, partitions=range(PARTITIONS), window=(0.0, end),
                       queue_drained=queue_drained)
        examples = result.summary()["examples"]
        for name, count in result.anomalies.items():
            if count:
                self.fail(name, f"{count}, e.g. {examples.get(name, [])[:3]}")
        self.event(f"checked: {result.acked} acked, {result.unknown} unknown, {result.queue_sent} queue sends and "
                   f"{result.queue_acked} queue acks answered, {result.commits} commits acknowledged, "
                   f"{len(self.failures)} failures")

    async def main(self) -> None:
        for node_id in NODES:
            await self.cluster.start_node(node_id)
        await self.cluster.network.spawn("n1", self.cluster.nodes[1].topics.create_topic(
            {"name": TOPIC, "partitions": PARTITIONS, "replication_factor": len(NODES)}))
        await self.cluster.network.spawn("n1", self.cluster.nodes[1].topics.create_topic(queue_spec(len(NODES))))
        first = self.cluster.nodes[1]
        await self.cluster.network.spawn("n1", ensure_offsets_topic(first.coordinator, first.topics))
        await asyncio.sleep(1.0)
        writers = [self.loop.create_task(self.writer(f"w{i + 1}"), name=f"writer-{i + 1}") for i in range(WRITERS)]
        writers += [self.loop.create_task(self.queue.sender(f"s{i + 1}"), name=f"sender-{i + 1}")
                    for i in range(QUEUE_SENDERS)]
        readers = [self.loop.create_task(self.reader(), name="reader")]
        readers += [self.loop.create_task(self.queue.receiver(f"r{i + 1}"), name=f"receiver-{i + 1}")
                    for i in range(QUEUE_RECEIVERS)]
        readers += [self.loop.create_task(self.group.member(f"m{i + 1}"), name=f"member-{i + 1}")
                    for i in range(GROUP_MEMBERS)]
        readers.append(self.loop.create_task(self.group.observer(), name="observer"))
        await self.nemesis()
        faults_end = self.loop.time()
        self.writing = self.queue.sending = False
        await asyncio.gather(*writers)
        settled = await self.settle()
        self.reading = self.queue.receiving = self.group.running = False
        await asyncio.gather(*readers)
        if settled:
            drained = await self.queue.drain()
            self.judge(await self.final_log(), self.replica_copies(), faults_end, drained)
        await self.cluster.stop()
        self.event("stopped")


def _produce(node: Node, *args: Any) -> Coroutine[Any, Any, list[dict[str, int]]]:
    return node.writes.produce_records(*args)


def _fetch(node: Node, *args: Any) -> Coroutine[Any, Any, tuple[LogRead, int]]:
    return node.reads.fetch(*args)


def decode_log(data: bytes | memoryview) -> dict[int, str]:
    view = memoryview(data)
    records: dict[int, str] = {}
    for position, header in iter_batches(view):
        for r in decode_records(view[position:position + header.size_bytes]):
            records[r.offset] = (r.value or b"").decode()
    return records


def _tmp_root() -> str | None:
    return next((d for d in TMP_ROOTS if os.path.isdir(d) and os.access(d, os.W_OK)), None)


def run_cluster_seed(seed: int, options: ClusterOptions = ClusterOptions()) -> Outcome:
    """Run one cluster schedule; the same seed gives the same trace (and hash) every time."""
    root = tempfile.mkdtemp(prefix="logbroker-sim-", dir=_tmp_root())
    loop = SimLoop()
    schedule = _ClusterSchedule(seed, options, loop, root)
    try:
        with schedule.cluster.world():
            run_loop(schedule.main(), loop=loop)
    except SimError as exc:
        schedule.fail("simulation", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # the schedule could not finish: the seed fails, others go on
        if not schedule.failures:
            schedule.fail("simulation", f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    gc.collect()
    errors = [f"{message}: {exc!r}" for message, exc in loop.errors if not is_stream_noise(message, exc)]
    if errors:
        schedule.failures.append(f"loop-errors: {errors[0]}" + (f" (and {len(errors) - 1} more)" if errors[1:] else ""))
    return Outcome(seed, schedule.trace.digest(), schedule.trace.count, tuple(schedule.failures),
                   loop.time() - loop._start_s, tuple(schedule.trace.tail))

