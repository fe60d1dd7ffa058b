"""One chaos run, start to end: namespaces (when allowed), etcd and the nodes, a replicated topic
and queue, the workload and the nemesis for ``duration_s``, then healing, settling, a last read of
every partition through the cluster, a clean stop, every node's own copy read from its data dir
(``segments.reader``, read-only), and the checker. Everything started is stopped, also on failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
from collections.abc import Mapping
from typing import Any, Final

from chaos.availability import report as availability_report
from chaos.checker import Result, check
from chaos.cluster import ADMIN, PASSWORD, ChaosCluster
from chaos.history import History, say
from chaos.nemesis import NETWORK_FAULTS, Nemesis
from chaos.network import ETCD, Network, NetworkUnavailableError
from chaos.slow_disk import SlowDisks, SlowDiskUnavailableError
from chaos.workload import Workload, client
from segments.encryption import open_batches
from segments.key_ring import load_ring
from segments.reader import SegmentReader, partition_directories

TOPIC: Final = "chaos"
QUEUE: Final = "chaos-queue"
SETTLE_S: Final = 90.0
STOP_WORKLOAD_S: Final = 90.0
DRAIN_S: Final = 60.0
FINAL_READ_S: Final = 180.0
CALL_BOUND_S: Final = 60.0  # what one client call may take with its retries, beyond a phase's own bound


@dataclasses.dataclass(frozen=True)
class Options:
    root: str
    duration_s: float = 60.0
    seed: int = 1
    nodes: int = 3
    partitions: int = 3
    producers: int = 4
    rate: float = 40.0  # records per second per producer
    queue_rate: float = 10.0
    network: bool = True  # try namespaces and partition faults
    encryption: bool = False  # every node with one key ring: records encrypted at rest


@dataclasses.dataclass
class Outcome:
    result: Result
    history: History
    summary: dict[str, Any]


async def _ready(options: Options, urls: list[str]) -> str:
    """Create the topic and the queue, wait until they are in sync; a token for the clients."""
    async with client(urls) as c:
        await c.create_topic(TOPIC, partitions=options.partitions, replication_factor=options.nodes)
        await c.create_topic(QUEUE, partitions=1, replication_factor=options.nodes, kind="queue")
        await _settled(urls, options.nodes, timeout_s=SETTLE_S)
        return str((await c.login(ADMIN, PASSWORD))["access_token"])


async def _settled(urls: list[str], replicas: int, *, timeout_s: float) -> bool:
    """Every partition of every topic has a leader and all its replicas in sync (bounded)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    async with client(urls) as c:
        while loop.time() < end:
            with contextlib.suppress(Exception):
                view = await c.cluster()
                parts = [p for t in view["topics"] for p in t["partitions"]]
                if parts and all(p["leader"] >= 0 and len(p["in_sync_replicas"]) == len(p["replicas"])
                                 for p in parts):
                    return True
            await asyncio.sleep(0.5)
    return False


async def final_log(urls: list[str], partitions: int) -> dict[int, dict[int, str]]:
    """Every partition read through the cluster from offset 0 to its high watermark."""
    log: dict[int, dict[int, str]] = {}
    async with client(urls) as c:
        for p in range(partitions):
            records: dict[int, str] = {}
            offset = 0
            for _ in range(100_000):
                fetched = await c.fetch_batches(TOPIC, p, offset, max_bytes=4 << 20)
                for r in fetched.records(offset):
                    records[r.offset] = (r.value or b"").decode()
                if fetched.next_offset >= fetched.high_watermark:
                    break
                offset = fetched.next_offset
            log[p] = records
    return log


def replica_copies(cluster: ChaosCluster) -> dict[str, dict[int, dict[int, str]]]:
    """Each node's copy of the topic, read from its data dir (the node stopped; batches encrypted
    at rest opened with the cluster's key ring)."""
    copies: dict[str, dict[int, dict[int, str]]] = {}
    ring = None if cluster.keys_file is None else load_ring(cluster.keys_file)
    opener = None if ring is None else functools.partial(open_batches, ring=ring)
    for node in cluster.node_ids:
        data_dir = cluster.data_dir(node)
        if not os.path.isdir(data_dir):
            continue
        copies[f"node-{node}"] = {
            p: {r.offset: (r.value or b"").decode() for r in SegmentReader(path).iter_records(opener=opener)}
            for p, path in partition_directories(data_dir, TOPIC).items()}
    return copies


async def _drive(options: Options, cluster: ChaosCluster, history: History,
                 network: Network | None) -> tuple[dict[int, dict[int, str]], dict[str, Any]]:
    urls = [cluster.urls[n] for n in cluster.node_ids]
    token = await _ready(options, urls)
    work = Workload(history, urls, TOPIC, options.partitions, QUEUE, token=token)
    nemesis = Nemesis(cluster, history, lambda: work.leaders, TOPIC, seed=options.seed, network=network)
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[Any]] = [loop.create_task(work.produce(f"p{i}", options.rate))
                                      for i in range(options.producers)]
    tasks += [loop.create_task(work.read("reader")), loop.create_task(work.group("group")),
              loop.create_task(work.observe_group("group-observer")),
              loop.create_task(work.queue_send("q", options.queue_rate)),
              loop.create_task(work.queue_receive("receiver-1")), loop.create_task(work.queue_receive("receiver-2")),
              loop.create_task(work.watch("watcher"))]
    await asyncio.sleep(2.0)
    faults_from = history.now()
    nemesis_task = loop.create_task(nemesis.run())
    try:
        await asyncio.sleep(options.duration_s)
    finally:
        nemesis.stop.set()
        await nemesis_task
    faults_to = history.now()
    say(f"faults over at {faults_to:.1f} s ({sum(nemesis.counts.values())}); waiting for every replica in sync")
    settled = await asyncio.wait_for(_settled(urls, options.nodes, timeout_s=SETTLE_S), SETTLE_S + CALL_BOUND_S)
    await asyncio.sleep(2.0)  # the clients write through the healed cluster for a moment
    say(f"in sync: {settled} at {history.now():.1f} s; stopping the clients")
    work.stop.set()
    done, pending = await asyncio.wait(tasks, timeout=STOP_WORKLOAD_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    errors = [repr(t.exception())[:300] for t in done if not t.cancelled() and t.exception() is not None]
    say(f"clients stopped at {history.now():.1f} s ({len(pending)} cancelled); draining the queue")
    drained = await asyncio.wait_for(work.queue_receive("drain", until_empty=True, deadline_s=DRAIN_S),
                                     DRAIN_S + CALL_BOUND_S)
    say(f"queue drained: {drained} at {history.now():.1f} s; reading the final log")
    log = await asyncio.wait_for(final_log(urls, options.partitions), FINAL_READ_S)
    return log, {"faults_from": faults_from, "faults_to": faults_to, "settled": settled, "queue_drained": drained,
                 "workload_errors": errors, "workload_stuck": len(pending),
                 "faults": dict(sorted(nemesis.counts.items()))}


def run(options: Options) -> Outcome:
    history = History()
    network: Network | None = None
    skipped = "" if options.network else "SKIPPED: not asked for (--no-network)"
    if options.network:
        try:
            network = Network.create([ETCD, *(f"node-{n}" for n in range(1, options.nodes + 1))])
        except NetworkUnavailableError as exc:
            skipped = f"SKIPPED: network namespaces refused here ({exc})"
    slow_disks: SlowDisks | None = None
    try:
        slow_disks = SlowDisks.build(os.path.join(options.root, "slow-disks"))
        disk_faults = "exercised when drawn (every fsync of a leader 200-500 ms slower)"
    except SlowDiskUnavailableError as exc:
        disk_faults = f"SKIPPED: {exc}"
    cluster = ChaosCluster(options.root, options.nodes, network=network, slow_disks=slow_disks,
                           encryption=options.encryption)
    try:
        cluster.start()
        log, facts = asyncio.run(_drive(options, cluster, history, network))
    finally:
        cluster.stop()
        if network is not None:
            network.close()
    replicas = replica_copies(cluster)
    window = (facts["faults_from"], facts["faults_to"])
    result = check(history.snapshot(), log, replicas, partitions=range(options.partitions), window=window,
                   queue_drained=facts["queue_drained"])
    availability = availability_report(history.snapshot(), TOPIC, range(options.partitions), window)
    exercised = sorted(f for f in facts["faults"] if f in NETWORK_FAULTS)
    data_changes = sum(n for key, n in result.leader_changes.items() if key.startswith(TOPIC + "/"))
    summary = {**result.summary(), "leader_changes_data_topic": data_changes, "duration_s": options.duration_s,
               "seed": options.seed, "encryption": "on" if options.encryption else "off",
               "fault_window_s": [facts["faults_from"], facts["faults_to"]], "faults": facts["faults"],
               "availability": availability,
               "partition_faults": (f"exercised: {', '.join(exercised)}" if exercised
                                    else skipped or "none drawn"),
               "disk_faults": (disk_faults if slow_disks is None or "slow_disk" in facts["faults"]
                               else "none drawn"),
               "settled_at_end": facts["settled"], "workload_errors": facts["workload_errors"],
               "workload_stuck": facts["workload_stuck"], "records_in_log": sum(map(len, log.values())),
               "replicas_read": {n: {str(p): len(r) for p, r in c.items()} for n, c in replicas.items()},
               "node_logs": cluster.logs}
    return Outcome(result, history, summary)


def format_summary(summary: Mapping[str, Any]) -> str:
    lines = [f"chaos run: {'VALID' if summary['valid'] else 'INVALID'}",
             f"  records acked {summary['records_acked']}, lost {summary['anomalies']['lost']}, "
             f"duplicated {summary['anomalies']['duplicated']}, misplaced {summary['anomalies']['misplaced']}, "
             f"unknown outcome {summary['records_unknown']} (stored {summary['records_unknown_stored']})",
             f"  leader changes {summary['leader_changes']} ({summary['leader_changes_data_topic']} of the data "
             f"topic's partitions); faults {summary['faults']}",
             f"  partition faults: {summary['partition_faults']}",
             f"  disk faults: {summary.get('disk_faults', '-')}; encryption at rest {summary.get('encryption', 'off')}",
             f"  longest unavailability per partition (s): {summary['longest_unavailability_s']}",
             *format_availability(summary.get("availability")),
             f"  group commits acked {summary['commits_acked']}; queue sent {summary['queue_sent_acked']}, "
             f"acked {summary['queue_acked']}, drained {summary['queue_drained']}",
             f"  anomalies {summary['anomalies']}"]
    return "\n".join(lines)


def format_availability(availability: Mapping[str, Any] | None) -> list[str]:
    """The availability lines of the printed summary (none for a summary without it)."""
    if not availability:
        return []
    shares = ", ".join(f"{p}: {share:.1%}" for p, share in availability["seconds_with_ack"].items())
    by_role = availability["worst_ack_gap_by_role_s"]
    worst = ", ".join(
        f"{kind} {gap:.2f}" + (f" ({', '.join(f'{r} {g:.2f}' for r, g in by_role[kind].items())})"
                               if len(by_role.get(kind, {})) > 1 else "")
        for kind, gap in availability["worst_ack_gap_s"].items())
    return [f"  availability: seconds with an ack per partition {shares}",
            f"  worst ack gap per fault kind (s; by the faulted node's role for the partition): {worst}",
            f"  worst ack gap where the faulted node only followed the partition: "
            f"{availability['worst_ack_gap_follower_faults_s']:.2f} s"]


def write_results(outcome: Outcome, out_dir: str) -> dict[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = {"history": os.path.join(out_dir, "history.jsonl"), "summary": os.path.join(out_dir, "summary.json"),
             "plot": os.path.join(out_dir, "chaos.png")}
    with open(paths["history"], "w", encoding="utf-8") as f:
        outcome.history.write(f)
    with open(paths["summary"], "w", encoding="utf-8") as f:
        json.dump(outcome.summary, f, indent=2, sort_keys=True)
        f.write("\n")
    from chaos.plot import plot  # matplotlib only where a figure is asked for

    plot(outcome.history.snapshot(), outcome.summary, paths["plot"])
    return paths
