"""One chaos run, start to end: namespaces (when allowed), etcd and the nodes, a replicated topic,
a replicated compacted topic and a queue, the workload and the nemesis for ``duration_s``, then
healing, settling, a last read of every partition through the cluster, a clean stop, every node's
own copy read from its data dir (``segments.reader``, read-only), and the checker. Everything
started is stopped, also on failure.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import os
from collections.abc import Mapping
from typing import Any, Final

from chaos.availability import report as availability_report
from chaos.checker import Result, check
from chaos.cluster import ADMIN, PASSWORD, SEGMENT_BYTES_MIN, ChaosCluster
from chaos.compacted import KeyedRecord, check_compacted
from chaos.history import History, say
from chaos.nemesis import NETWORK_FAULTS, Nemesis
from chaos.network import ETCD, Network, NetworkUnavailableError
from chaos.slow_disk import SlowDisks, SlowDiskUnavailableError
from chaos.workload import Workload, client
from segments.batch import Record
from segments.encryption import open_batches
from segments.key_ring import load_ring
from segments.reader import SegmentReader, partition_directories

TOPIC: Final = "chaos"
QUEUE: Final = "chaos-queue"
COMPACTED: Final = "chaos-compacted"
# Small segments, a low dirty ratio and a short lag, so that every replica compacts many times
# during the faults; tombstones removed well within the run, yet long after any follower could
# lag (decision 0330).
COMPACTED_CONFIG: Final = {"cleanup_policy": "compact", "segment_bytes": SEGMENT_BYTES_MIN,
                           "segment_index_bytes": 64 * 1024, "min_cleanable_dirty_ratio": 0.1,
                           "min_compaction_lag_ms": 5_000, "delete_retention_ms": 30_000}
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
    keyed_writers: int = 2
    keyed_rate: float = 20.0  # keyed records per second per writer, on the compacted topic
    network: bool = True  # try namespaces and partition faults
    encryption: bool = False  # every node with one key ring: records encrypted at rest


@dataclasses.dataclass
class Outcome:
    result: Result
    history: History
    summary: dict[str, Any]


async def _ready(options: Options, urls: list[str]) -> str:
    """Create the topics and the queue, wait until they are in sync; a token for the clients."""
    async with client(urls) as c:
        await c.create_topic(TOPIC, partitions=options.partitions, replication_factor=options.nodes)
        await c.create_topic(COMPACTED, partitions=options.partitions, replication_factor=options.nodes,
                             config=dict(COMPACTED_CONFIG))
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


async def final_keyed_log(urls: list[str], partitions: int) -> tuple[dict[int, list[KeyedRecord]], dict[int, int]]:
    """Every partition of the compacted topic read through the cluster from its log start to its
    high watermark, and those high watermarks."""
    log: dict[int, list[KeyedRecord]] = {}
    ends: dict[int, int] = {}
    async with client(urls) as c:
        for p in range(partitions):
            records: list[KeyedRecord] = []
            offset = await c.list_offset(COMPACTED, p, "earliest")
            for _ in range(100_000):
                fetched = await c.fetch_batches(COMPACTED, p, offset, max_bytes=4 << 20)
                records += map(keyed, fetched.records(offset))
                ends[p] = fetched.high_watermark
                if fetched.next_offset >= fetched.high_watermark:
                    break
                offset = fetched.next_offset
            log[p] = records
    return log, ends


def keyed(record: Record) -> KeyedRecord:
    return KeyedRecord(record.offset, (record.key or b"").decode(),
                       None if record.value is None else record.value.decode(),
                       dict(record.headers).get("id", b"").decode())


def _node_records(cluster: ChaosCluster, topic: str) -> dict[str, dict[int, list[Record]]]:
    """Each node's copy of ``topic``, read from its data dir (the node stopped; batches encrypted
    at rest opened with the cluster's key ring), in the order stored."""
    copies: dict[str, dict[int, list[Record]]] = {}
    ring = None if cluster.keys_file is None else load_ring(cluster.keys_file)
    opener = None if ring is None else functools.partial(open_batches, ring=ring)
    for node in cluster.node_ids:
        data_dir = cluster.data_dir(node)
        if not os.path.isdir(data_dir):
            continue
        copies[f"node-{node}"] = {p: stored_records(SegmentReader(path), opener)
                                  for p, path in partition_directories(data_dir, topic).items()}
    return copies


def stored_records(reader: SegmentReader, opener: Any) -> list[Record]:
    """Every record a copy holds, from its own log start (compaction may have emptied and removed
    its first segments, and retention its oldest)."""
    return list(reader.iter_records(reader.log_start_offset(), opener=opener))


def replica_copies(cluster: ChaosCluster) -> dict[str, dict[int, dict[int, str]]]:
    """Each node's copy of the topic, ``{node: {partition: {offset: value}}}``."""
    return {node: {p: {r.offset: (r.value or b"").decode() for r in records} for p, records in copy.items()}
            for node, copy in _node_records(cluster, TOPIC).items()}


def keyed_copies(cluster: ChaosCluster) -> dict[str, dict[int, list[KeyedRecord]]]:
    """Each node's copy of the compacted topic, its records in the order stored."""
    return {node: {p: list(map(keyed, records)) for p, records in copy.items()}
            for node, copy in _node_records(cluster, COMPACTED).items()}


async def _drive(options: Options, cluster: ChaosCluster, history: History,
                 network: Network | None) -> tuple[dict[int, dict[int, str]], dict[str, Any]]:
    """The run under faults; the final log of the topic, and the facts the summary needs (the
    compacted topic's final log and high watermarks among them)."""
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
              loop.create_task(work.watch("watcher")),
              loop.create_task(work.observe_compaction("compaction-observer", COMPACTED))]
    tasks += [loop.create_task(work.keyed(f"k{i}", COMPACTED, options.partitions, options.keyed_rate,
                                          seed=options.seed))
              for i in range(options.keyed_writers)]
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
    keyed_log, keyed_ends = await asyncio.wait_for(final_keyed_log(urls, options.partitions), FINAL_READ_S)
    return log, {"keyed_log": keyed_log, "keyed_ends": keyed_ends,
                 "faults_from": faults_from, "faults_to": faults_to, "settled": settled, "queue_drained": drained,
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
    events = history.snapshot()
    compacted = check_compacted(events, facts["keyed_log"], keyed_copies(cluster), facts["keyed_ends"])
    result = check(events, log, replicas, partitions=range(options.partitions), window=window,
                   queue_drained=facts["queue_drained"], compacted=compacted)
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
    summary["compacted_topic"].update(compaction_seen(events), topic=COMPACTED, config=dict(COMPACTED_CONFIG))
    return Outcome(result, history, summary)


def compaction_seen(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the nodes' compaction metrics showed: passes seen (a lower bound, see
    ``Workload.observe_compaction``) and bytes removed (each node's last figure per partition)."""
    seen = [e for e in events if e["f"] == "compaction" and e["type"] == "ok"]
    removed: dict[tuple[str, int], float] = {}
    for e in seen:
        removed[(e["node"], int(e["partition"]))] = float(e["bytes_removed"])
    return {"compaction_passes_seen": len(seen),
            "compaction_passes_seen_by_node": dict(sorted(collections.Counter(e["node"] for e in seen).items())),
            "compaction_bytes_removed_seen": int(sum(removed.values()))}


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
             *format_compacted(summary.get("compacted_topic")),
             f"  anomalies {summary['anomalies']}"]
    return "\n".join(lines)


def format_compacted(compacted: Mapping[str, Any] | None) -> list[str]:
    """The compacted topic's lines of the printed summary (one saying so when it was not checked)."""
    if not compacted or not compacted.get("checked"):
        return ["  compacted topic: not checked"]
    return [f"  compacted topic: writes acked {compacted['writes_acked']} ({compacted['tombstones_acked']} "
            f"tombstones), unknown outcome {compacted['writes_unknown']}; keys compared {compacted['keys_compared']} "
            f"over {compacted['replicas_compared']} replicas, key conflicts {compacted['key_conflicts']}, lost "
            f"updates {compacted['lost_updates']}, offset order {compacted['compacted_offset_order']}",
            f"  compaction: passes seen {compacted.get('compaction_passes_seen', '-')}, "
            f"{compacted['records_in_log']} records left of {compacted['offsets_below_high_watermark']} offsets"]


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
            f"{availability['worst_ack_gap_follower_faults_s']:.2f} s (with a leader's or etcd's fault active "
            f"too: {availability.get('worst_ack_gap_follower_faults_overlapped_s', 0.0):.2f} s)"]


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
