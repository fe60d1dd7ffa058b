"""What replication costs a producer (issue 16, item 7): LogBroker with replication factor 2 and 3
and ``acks=all`` on three nodes (a real etcd), against one lone LogBroker node with ``acks=1``, and
the same load on two replicated peers, each a real three-server cluster on loopback: NATS JetStream
(file streams, R1/R2/R3) and RabbitMQ (streams with an initial cluster size of 1/2/3).

The load, alike for every system: ``PRODUCERS`` producers, one per log (a partition of a
3-partition topic, or a stream of its own), records of ``RECORD_BYTES`` B, each producer keeping at
most ``WINDOW`` records unacknowledged, for ``Plan.seconds`` per point; every record's
acknowledgement is awaited. LogBroker: ``IN_FLIGHT`` requests of ``BATCH_RECORDS`` records per
producer, sent to the partition's leader (from the topic's describe output, so nothing is
forwarded), as prebuilt binary batches (``segments.batch.encode_batch``, the main figures) and as
JSON bodies (``*_json_*``). NATS: ``js.publish_async`` with a window of ``WINDOW``, on a connection
to the stream leader's server. RabbitMQ: rstream ``send_batch`` of ``BATCH_RECORDS`` messages with
publisher confirms, at most ``WINDOW`` unconfirmed, on the stream leader's node.

Modes: ``single`` (LogBroker alone: a lone node with the local coordinator, replication factor 1,
``acks=1``), ``r1`` (the cluster, one replica; LogBroker ``acks=1``), ``r2`` and ``r3`` (the
cluster, two and three replicas; LogBroker ``acks=all``). Figures per mode (``_json`` for
LogBroker's JSON bodies): ``produce_<mode>_records_per_s``; ``produce_<mode>_p50_ms`` and
``_p99_ms``, from handing a record to the client (LogBroker: sending its request) to its
acknowledgement. Ratios per repetition, summarized like the figures:
``produce_<mode>_over_single_{throughput,p50,p99}_ratio`` (LogBroker; the target is a throughput
ratio >= 0.5) and ``produce_<mode>_over_r1_...`` (every system: replicated against unreplicated on
the same cluster).

One system at a time (its cluster started, measured, stopped by PID), the modes in an order that
rotates each repetition; figures are medians of the repetitions with min and max (DESIGN §9),
written as ``replication.<system>.json`` beside the harness's other results, which rebuilds
REPORT.md. A peer cluster that cannot be started or measured is recorded as the ``status`` of its
document, with the reason, and the run exits non-zero.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import json
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import aiohttp
import uvloop

from benchmarks import cluster_nodes, single_node
from benchmarks.cluster_bench import Pinned, login, wait_for_cluster
from benchmarks.results import make_document
from benchmarks.single_node import Samples, gather
from benchmarks.stats import percentiles, summarize_samples, unit_of
from segments.batch import ProducerRecord, encode_batch

RECORD_BYTES: Final = 100
BATCH_RECORDS: Final = 100
IN_FLIGHT: Final = 4                          # LogBroker requests per producer
WINDOW: Final = IN_FLIGHT * BATCH_RECORDS     # unacknowledged records per producer, every system
PRODUCERS: Final = 3                          # one per partition / stream
BATCH_TYPE: Final = "application/vnd.logbroker.batch"
SYSTEMS: Final = ("logbroker", "nats", "rabbitmq")
REPLICATED: Final = ("r2", "r3")
MODES: Final = {"logbroker": ("single", "r1", "r2", "r3"), "nats": ("r1", "r2", "r3"),
                "rabbitmq": ("r1", "r2", "r3")}
BODIES: Final = {"logbroker": ("", "_json"), "nats": ("",), "rabbitmq": ("",)}
READY_TIMEOUT_S: Final = 60.0
READY_POLL_S: Final = 0.2
REQUEST_TIMEOUT_S: Final = 30.0
DRAIN_TIMEOUT_S: Final = 60.0                 # for the acknowledgements still due after a point's time
SETUP_S: Final = 180.0                        # per system: topics / streams and warm-up, beyond the points


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    seconds: float    # per point (system, mode, body) and repetition


QUICK = Plan(reps=3, seconds=1.5)
FULL = Plan(reps=5, seconds=8.0)  # the RF 3 ÷ lone node target is judged on the median of at least 5


def rotated(items: Sequence[str], rep: int) -> list[str]:
    k = rep % len(items)
    return [*items[k:], *items[:k]]


def replicas(mode: str) -> int:
    return 1 if mode == "single" else int(mode.removeprefix("r"))


def point_figures(name: str, rate: float, latencies_ms: list[float]) -> dict[str, float]:
    if not latencies_ms:
        raise RuntimeError(f"{name}: no record was acknowledged")
    p50, p99 = percentiles(latencies_ms, (0.5, 0.99))
    return {f"{name}_records_per_s": rate, f"{name}_p50_ms": p50, f"{name}_p99_ms": p99}


def ratios(system: str, samples: Samples) -> None:
    """Per repetition, each replicated mode against ``single`` (LogBroker) and against ``r1``."""
    for body in BODIES[system]:
        for base in ("single", "r1"):
            if base not in MODES[system]:
                continue
            for mode in REPLICATED:
                for figure, ratio in (("records_per_s", "throughput"), ("p50_ms", "p50"), ("p99_ms", "p99")):
                    top, bottom = samples[f"produce_{mode}{body}_{figure}"], samples[f"produce_{base}{body}_{figure}"]
                    samples[f"produce_{mode}{body}_over_{base}_{ratio}_ratio"] = \
                        [a / b for a, b in zip(top, bottom, strict=True)]


def say(text: str) -> None:
    print(f"[replication] {text}", flush=True)


# ---- LogBroker ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Target:
    """Where one producer sends: the leader of its partition."""

    node: Pinned
    path: str
    body: bytes
    headers: dict[str, str]


async def drive_logbroker(targets: Sequence[Target], seconds: float) -> tuple[float, list[float]]:
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def one(target: Target) -> int:
        moved = 0
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            await target.node.call("POST", target.path, data=target.body, headers=target.headers)
            latencies.append((time.perf_counter() - sent) * 1000)
            moved += BATCH_RECORDS
        return moved

    moved = await asyncio.gather(*(one(t) for t in targets for _ in range(IN_FLIGHT)))
    return sum(moved) / (time.perf_counter() - started), latencies


async def leaders(node: Pinned, topic: str) -> dict[str, Any]:
    """The topic's describe output once every partition has a leader (bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        described = await node.json("GET", f"/v1/topics/{topic}")
        if all(p["leader"] is not None for p in described["partitions"]):
            return dict(described)
        if time.monotonic() >= deadline:
            raise RuntimeError(f"topic {topic} had partitions without a leader after {READY_TIMEOUT_S} s")
        await asyncio.sleep(READY_POLL_S)


async def warm_up(target: Target) -> None:
    """One request through, retried while the partition is still settling (503, bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            await target.node.call("POST", target.path, data=target.body, headers=target.headers)
            return
        except RuntimeError as exc:
            if ": 503 " not in str(exc) or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(READY_POLL_S)


def logbroker_targets(nodes: dict[int, Pinned], topic: str, described: dict[str, Any],
                      acks: str) -> dict[str, list[Target]]:
    """Per body ("" for prebuilt batches, "_json"), one target per partition, at its leader."""
    value = "v" * RECORD_BYTES
    batch = encode_batch([ProducerRecord(value.encode()) for _ in range(BATCH_RECORDS)])
    out: dict[str, list[Target]] = {"": [], "_json": []}
    for p in sorted(described["partitions"], key=lambda p: p["partition"])[:PRODUCERS]:
        node, partition = nodes[p["leader"]], p["partition"]
        json_body = json.dumps({"records": [{"value": value, "partition": partition}
                                            for _ in range(BATCH_RECORDS)]}).encode()
        path = f"/v1/topics/{topic}/records?acks={acks}"
        out[""].append(Target(node, f"{path}&partition={partition}", batch, {"Content-Type": BATCH_TYPE}))
        out["_json"].append(Target(node, path, json_body, {"Content-Type": "application/json"}))
    return out


async def measure_logbroker(cluster: dict[int, str], local_url: str, plan: Plan, samples: Samples,
                            notes: dict[str, Any]) -> None:
    connector = aiohttp.TCPConnector(limit=4 * PRODUCERS * IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
        token = await login(session, cluster[1], cluster_nodes.ADMIN, cluster_nodes.PASSWORD)
        nodes = {node_id: Pinned(session, url, token) for node_id, url in cluster.items()}
        await wait_for_cluster(nodes[1], len(nodes))
        local_token = await login(session, local_url, cluster_nodes.ADMIN, cluster_nodes.PASSWORD)
        local = Pinned(session, local_url, local_token)
        targets: dict[str, dict[str, list[Target]]] = {}
        for mode in MODES["logbroker"]:
            admin, by_id = (local, {1: local}) if mode == "single" else (nodes[1], nodes)
            topic = f"replication-{mode}"
            spec: dict[str, Any] = {"name": topic, "partitions": PRODUCERS, "config": {"flush": "interval"}}
            if mode != "single":
                spec["replication_factor"] = replicas(mode)
            await admin.json("POST", "/v1/topics", spec)
            described = await leaders(admin, topic)
            targets[mode] = logbroker_targets(by_id, topic, described, "1" if replicas(mode) == 1 else "all")
            for target in targets[mode][""]:
                await warm_up(target)
        for rep in range(plan.reps):
            order = rotated(MODES["logbroker"], rep)
            say(f"logbroker, repetition {rep + 1}/{plan.reps} ({', '.join(order)})")
            for body in BODIES["logbroker"]:
                for mode in order:
                    rate, latencies = await drive_logbroker(targets[mode][body], plan.seconds)
                    gather(samples, point_figures(f"produce_{mode}{body}", rate, latencies))
        for mode in MODES["logbroker"]:
            admin = local if mode == "single" else nodes[1]
            described = await admin.json("GET", f"/v1/topics/replication-{mode}")
            notes[f"partitions_{mode}"] = [{k: p[k] for k in ("partition", "leader", "replicas", "in_sync_replicas",
                                                               "log_end_offset")} for p in described["partitions"]]
            if mode in REPLICATED:
                in_sync = sum(1 for p in described["partitions"] if set(p["in_sync_replicas"]) >= set(p["replicas"]))
                notes[f"all_replicas_in_sync_at_end_{mode}"] = f"{in_sync} of {len(described['partitions'])} partitions"


def run_logbroker(plan: Plan, work_dir: str | None) -> tuple[str, Samples, dict[str, Any]]:
    from importlib.metadata import version

    samples: Samples = {}
    notes: dict[str, Any] = {}
    with single_node.work_dir("replicationbench-", work_dir) as work, \
            cluster_nodes.running_cluster(work) as nodes, cluster_nodes.running_local_node(work) as local:
        say(f"logbroker: etcd and {len(nodes)} nodes, and a lone node, are up")
        bounded(measure_logbroker({n.node_id: n.url for n in nodes}, local.url, plan, samples, notes), plan,
                "logbroker")
    settings = {
        "client": "aiohttp (HTTP/1.1 keep-alive), uvloop; bearer token",
        "durability": "flush=interval (fsync every 1000 ms); single and r1: acks=1 (the leader's append); "
                      "r2, r3: acks=all (answered once the batch is below the high watermark, DESIGN §6)",
        "replication": "single: a lone node, local coordinator, replication factor 1; r1, r2, r3: three nodes "
                       "on one etcd, replication factor 1, 2, 3, internal RPC over mutual TLS; auth on everywhere",
        "produce": f"{PRODUCERS} producers, one per partition of a {PRODUCERS}-partition topic, each sending to "
                   f"its partition's leader (from GET /v1/topics/<name>) with {IN_FLIGHT} requests of "
                   f"{BATCH_RECORDS} records in flight: prebuilt binary batches ({BATCH_TYPE}); *_json: JSON "
                   "bodies",
        **notes,
    }
    return version("logbroker"), samples, settings


# ---- NATS JetStream ----------------------------------------------------------------------------

async def drive_nats(publishers: Sequence[tuple[Any, str]], seconds: float) -> tuple[float, list[float]]:
    payload = b"v" * RECORD_BYTES
    latencies: list[float] = []
    failed = 0
    started = time.perf_counter()
    deadline = started + seconds

    def done(sent: float, future: asyncio.Future[Any]) -> None:
        nonlocal failed
        if future.cancelled() or future.exception() is not None:
            failed += 1
        else:
            latencies.append((time.perf_counter() - sent) * 1000)

    async def one(js: Any, subject: str) -> None:
        while time.perf_counter() < deadline:
            future = await js.publish_async(subject, payload)
            future.add_done_callback(functools.partial(done, time.perf_counter()))
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            await js.publish_async_completed()

    await asyncio.gather(*(one(js, subject) for js, subject in publishers))
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{failed} NATS publishes were not acknowledged")
    return len(latencies) / elapsed, latencies


async def measure_nats(cluster: Any, plan: Plan, samples: Samples, notes: dict[str, Any]) -> None:
    import nats
    from nats.js.api import Placement, StorageType, StreamConfig

    from benchmarks.nats_cluster import wait_for_meta_leader

    admin = await nats.connect(cluster.nodes[0].url, connect_timeout=10, max_reconnect_attempts=0)
    connections = [admin]
    try:
        js = admin.jetstream()
        await wait_for_meta_leader(js)
        publishers: dict[str, list[tuple[Any, str]]] = {}
        for mode in MODES["nats"]:
            publishers[mode] = []
            for i in range(PRODUCERS):
                name = f"{mode}-{i}"
                placement = Placement(tags=[cluster.nodes[i].name]) if replicas(mode) == 1 else None
                await js.add_stream(StreamConfig(name=name, subjects=[name], storage=StorageType.FILE,
                                                 num_replicas=replicas(mode), placement=placement))
                leader = await nats_leader(js, name)
                notes.setdefault(f"leaders_{mode}", []).append(leader)
                nc = await nats.connect(cluster.url_of(leader), connect_timeout=10, max_reconnect_attempts=0)
                connections.append(nc)
                producer = nc.jetstream(publish_async_max_pending=WINDOW)
                await producer.publish(name, b"warm-up")
                publishers[mode].append((producer, name))
        for rep in range(plan.reps):
            order = rotated(MODES["nats"], rep)
            say(f"nats, repetition {rep + 1}/{plan.reps} ({', '.join(order)})")
            for mode in order:
                rate, latencies = await drive_nats(publishers[mode], plan.seconds)
                gather(samples, point_figures(f"produce_{mode}", rate, latencies))
    finally:
        await asyncio.gather(*(nc.close() for nc in connections), return_exceptions=True)


async def nats_leader(js: Any, stream: str) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        info = await js.stream_info(stream)
        if info.cluster is not None and info.cluster.leader:
            return str(info.cluster.leader)
        if time.monotonic() >= deadline:
            raise RuntimeError(f"NATS stream {stream} had no leader after {READY_TIMEOUT_S} s")
        await asyncio.sleep(READY_POLL_S)


def run_nats(plan: Plan, work_dir: str | None) -> tuple[str, Samples, dict[str, Any]]:
    from importlib.metadata import version

    from benchmarks.nats_cluster import NatsCluster

    samples: Samples = {}
    notes: dict[str, Any] = {}
    cluster = NatsCluster(work_dir)
    with cluster:
        say(f"nats: {cluster.size} servers are up")
        bounded(measure_nats(cluster, plan, samples, notes), plan, "nats")
    settings = {
        "client": f"nats-py {version('nats-py')} (uvloop), one connection per producer, to the stream leader's server",
        "durability": "JetStream file store, no fsync (nats-server 2.9 has no sync_interval); a publish ack means "
                      "stored by a majority of the stream's replicas (Raft)",
        "replication": f"{cluster.size} servers in one cluster on loopback; r1, r2, r3: streams of 1, 2, 3 replicas "
                       "(r1 placed by server tag, one stream per server)",
        "produce": f"{PRODUCERS} producers, one stream each, js.publish_async with at most {WINDOW} unacknowledged",
        **notes,
    }
    return cluster.version, samples, settings


# ---- RabbitMQ streams --------------------------------------------------------------------------

class Confirms:
    """One rstream producer's unconfirmed messages: their send times and a window of ``WINDOW``."""

    def __init__(self, latencies: list[float]) -> None:
        self.latencies = latencies
        self.unconfirmed = 0
        self.failed = 0
        self.sent_at: dict[int, float] = {}
        self.early: dict[int, float] = {}     # confirmed before send_batch returned their ids
        self.changed = asyncio.Event()

    def on_confirm(self, status: Any) -> None:
        now = time.perf_counter()
        self.unconfirmed -= 1
        if not status.is_confirmed:
            self.failed += 1
        else:
            sent = self.sent_at.pop(status.message_id, None)
            if sent is None:
                self.early[status.message_id] = now
            else:
                self.latencies.append((now - sent) * 1000)
        self.changed.set()

    def sent(self, ids: list[int], at: float) -> None:
        for message_id in ids:
            confirmed = self.early.pop(message_id, None)
            if confirmed is None:
                self.sent_at[message_id] = at
            else:
                self.latencies.append((confirmed - at) * 1000)

    async def until(self, most: int) -> None:
        while self.unconfirmed > most:
            self.changed.clear()
            await self.changed.wait()


async def drive_rabbitmq(publishers: Sequence[tuple[Any, str]], seconds: float) -> tuple[float, list[float]]:
    batch = [b"v" * RECORD_BYTES] * BATCH_RECORDS
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def one(producer: Any, stream: str) -> int:
        confirms = Confirms(latencies)
        while time.perf_counter() < deadline:
            await confirms.until(WINDOW - BATCH_RECORDS)
            confirms.unconfirmed += BATCH_RECORDS
            at = time.perf_counter()
            confirms.sent(await producer.send_batch(stream, batch, on_publish_confirm=confirms.on_confirm), at)
        async with asyncio.timeout(DRAIN_TIMEOUT_S):
            await confirms.until(0)
        return confirms.failed

    failed = sum(await asyncio.gather(*(one(p, s) for p, s in publishers)))
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{failed} RabbitMQ stream messages were not confirmed")
    return len(latencies) / elapsed, latencies


async def measure_rabbitmq(nodes: Sequence[Any], plan: Plan, samples: Samples, notes: dict[str, Any]) -> None:
    from rstream import Producer

    from benchmarks.drivers.rabbitmq_driver import PASSWORD, USER

    producers = [Producer("127.0.0.1", node.stream_port, username=USER, password=PASSWORD) for node in nodes]
    try:
        for producer in producers:
            await producer.start()
        publishers: dict[str, list[tuple[Any, str]]] = {}
        for mode in MODES["rabbitmq"]:
            publishers[mode] = []
            for i, producer in enumerate(producers[:PRODUCERS]):
                name = f"{mode}-{i}"
                # Created through node i, which leads it (client-local).
                await producer.create_stream(name, arguments={"initial-cluster-size": replicas(mode),
                                                              "queue-leader-locator": "client-local"})
                placed = await rabbitmq_placement(producers[0], name, replicas(mode),
                                                  {node.stream_port: f"node-{n}" for n, node in enumerate(nodes, 1)})
                notes.setdefault(f"leaders_{mode}", []).append(placed)
                await producer.send_wait(name, b"warm-up")
                publishers[mode].append((producer, name))
        for rep in range(plan.reps):
            order = rotated(MODES["rabbitmq"], rep)
            say(f"rabbitmq, repetition {rep + 1}/{plan.reps} ({', '.join(order)})")
            for mode in order:
                rate, latencies = await drive_rabbitmq(publishers[mode], plan.seconds)
                gather(samples, point_figures(f"produce_{mode}", rate, latencies))
    finally:
        await asyncio.gather(*(p.close() for p in producers), return_exceptions=True)


async def rabbitmq_placement(producer: Any, stream: str, wanted: int, names: dict[int, str]) -> str:
    """Once the stream's metadata lists ``wanted`` replicas online (bounded): its leader's node and
    the replica count, from the stream protocol's metadata."""
    client = await producer.default_client
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        leader, followers = await client.query_leader_and_replicas(stream)
        if 1 + len(followers) >= wanted:
            return f"{names.get(leader.port, leader.port)}, {1 + len(followers)} replicas"
        if time.monotonic() >= deadline:
            raise RuntimeError(f"RabbitMQ stream {stream} listed {1 + len(followers)} of {wanted} replicas "
                               f"after {READY_TIMEOUT_S} s")
        await asyncio.sleep(READY_POLL_S)


def run_rabbitmq(plan: Plan, work_dir: str | None) -> tuple[str, Samples, dict[str, Any]]:
    from importlib.metadata import version

    from benchmarks.rabbitmq_cluster import RabbitMQCluster

    samples: Samples = {}
    notes: dict[str, Any] = {}
    cluster = RabbitMQCluster(work_dir)
    with cluster:
        say(f"rabbitmq: {cluster.size} nodes joined in one cluster")
        bounded(measure_rabbitmq(cluster.nodes, plan, samples, notes), plan, "rabbitmq")
    settings = {
        "client": f"rstream {version('rstream')} (uvloop), one producer per stream, connected to the stream leader",
        "durability": "streams, no fsync per message or batch; a publisher confirm means written by a majority "
                      "of the stream's replicas (page cache)",
        "replication": f"{cluster.size} nodes joined with rabbitmqctl join_cluster on loopback; r1, r2, r3: "
                       "streams of initial-cluster-size 1, 2, 3, each led by the node it was created through",
        "produce": f"{PRODUCERS} producers, one stream each, send_batch of {BATCH_RECORDS} raw messages with "
                   f"publisher confirms, at most {WINDOW} unconfirmed",
        **notes,
    }
    return cluster.version, samples, settings


# ---- the run -----------------------------------------------------------------------------------

RUNNERS: Final[dict[str, Callable[[Plan, str | None], tuple[str, Samples, dict[str, Any]]]]] = {
    "logbroker": run_logbroker, "nats": run_nats, "rabbitmq": run_rabbitmq}


def bounded(measure: Awaitable[None], plan: Plan, system: str) -> None:
    """Run ``measure`` on uvloop within ``budget_s`` (a TimeoutError that says the bound)."""
    budget = budget_s(plan, system)

    async def within() -> None:
        try:
            async with asyncio.timeout(budget):
                await measure
        except TimeoutError as exc:
            raise TimeoutError(f"{system}: the measuring did not end within {budget:g} s") from exc

    uvloop.run(within())


def budget_s(plan: Plan, system: str) -> float:
    """The bound on one system's measuring: every point's time, drains and set-up."""
    points = plan.reps * len(MODES[system]) * len(BODIES[system])
    return points * (plan.seconds + 5.0) + SETUP_S


def document(system: str, version: str, samples: Samples, settings: dict[str, Any], *, run_id: str,
             started_at: datetime.datetime, plan: Plan, quick: bool, command: str,
             status: str | None = None) -> dict[str, Any]:
    """``replication.<system>.json``: the figures (median, min, max of the repetitions) and ratios."""
    if status is None:
        ratios(system, samples)
    figures = summarize_samples(samples) if status is None else {}
    params: dict[str, Any] = {
        "run_id": run_id, "command": command, "quick": quick, **dataclasses.asdict(plan),
        "record_bytes": RECORD_BYTES, "producers": PRODUCERS, "window_records": WINDOW,
        "modes": list(MODES[system]), **settings}
    if status is not None:
        params["status"] = status
    return make_document("replication", system=system, version=version, started_at=started_at, params=params,
                         figures=figures, units={name: unit_of(name) for name in figures})


def run(*, quick: bool, out_dir: str, work_dir: str | None, systems: Sequence[str] = SYSTEMS,
        command: str = "python -m benchmarks replication") -> list[dict[str, Any]]:
    """Measure each system in turn and write its document, REPORT.md and the plots. A peer that
    fails is recorded with its reason (``status``); LogBroker failing ends the run."""
    from benchmarks import harness
    from benchmarks.plan import FULL as HARNESS_PLAN

    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    run_id = started.strftime("%Y%m%dT%H%M%SZ")
    documents = []
    for system in systems:
        say(f"{system}: starting")
        try:
            version, samples, settings = RUNNERS[system](plan, work_dir)
        except Exception as exc:
            if system == "logbroker":
                raise
            traceback.print_exc()
            reason = f"failed: {type(exc).__name__}: {exc}".strip()
            say(f"{system}: {reason}")
            documents.append(document(system, "unknown", {}, {}, run_id=run_id, started_at=started, plan=plan,
                                      quick=quick, command=command, status=reason[:2000]))
            continue
        documents.append(document(system, version, samples, settings, run_id=run_id, started_at=started, plan=plan,
                                  quick=quick, command=command))
    harness.write_run(documents, out_dir, rates=HARNESS_PLAN.latency_rates)
    print_summary(documents)
    return documents


def print_summary(documents: Sequence[dict[str, Any]]) -> None:
    """records/s and p50/p99 per system and mode, then the ratios."""
    for d in documents:
        if "status" in d["params"]:
            print(f"{d['system']:<10} {d['params']['status']}")
            continue
        figures = d["figures"]
        for name in figures:
            if name.endswith("_records_per_s") and not name.endswith(("_min", "_max")):
                stem = name.removesuffix("_records_per_s")
                print(f"{d['system']:<10} {stem:<22} {figures[name]:>12,.0f} records/s  "
                      f"p50 {figures[stem + '_p50_ms']:>8.2f} ms  p99 {figures[stem + '_p99_ms']:>8.2f} ms")
        for name in figures:
            if name.endswith("_throughput_ratio"):
                print(f"{d['system']:<10} {name:<44} {figures[name]:.2f} ({figures[name + '_min']:.2f} to "
                      f"{figures[name + '_max']:.2f})")


def failed(documents: Sequence[dict[str, Any]]) -> list[str]:
    return [str(d["system"]) for d in documents if "status" in d["params"]]

