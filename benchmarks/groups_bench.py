"""Consumer group benchmark: 3 members of one group consume a 6-partition topic.

The topic is filled with 100-byte records (prebuilt batches of 1000), three ``GroupConsumer``
members (concurrent tasks of one client process, each with its own client) join, settle on one
generation (2 partitions each), then poll until every record is consumed, committing after each
poll. ``consume_records_per_s`` covers that drain (raw-batch fetches, checksums verified, every
record decoded); each record must be consumed exactly once. ``commit_ms`` is the median latency
of a one-partition commit, ``join_ms`` that of a join (a rebalance).
``consume_records_per_s_member_processes`` is the same drain by three member processes
(``benchmarks.group_worker``), measured in the same run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import statistics
import time

import uvloop

from benchmarks import single_node
from benchmarks.single_node import Samples, gather, publish, run_worker_processes, summarize_all
from logbroker.client import Client, GroupConsumer
from logbroker.launcher import NodeProcess
from segments.batch import ProducerRecord, encode_batch

PARTITIONS = 6
MEMBERS = 3
RECORD_BYTES = 100
FILL_BATCH = 1000
FETCH_BYTES = 4 << 20
COMMITS = 200


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    records: int


QUICK = Plan(reps=3, records=300_000)
FULL = Plan(reps=3, records=1_800_000)


async def fill(client: Client, topic: str, total: int) -> None:
    payload = os.urandom(RECORD_BYTES)
    for n in range(total // FILL_BATCH):
        await client.produce_batch(topic, n % PARTITIONS, encode_batch([ProducerRecord(payload)] * FILL_BATCH))


async def member_loop(consumer: GroupConsumer, total: int, seen: set[tuple[int, int]]) -> int:
    count = 0
    while len(seen) < total:
        records = await consumer.poll(timeout_ms=100)
        for r in records:
            key = (r.partition, r.offset)
            assert key not in seen, f"{key} consumed twice in one generation"
            seen.add(key)
        count += len(records)
        if records:
            await consumer.commit()
    return count


async def one_rep(url: str, rep: int, plan: Plan) -> dict[str, float]:
    topic, group = f"bench-groups-{rep}", f"bench-group-{rep}"
    clients = [Client(url) for _ in range(MEMBERS)]
    try:
        await clients[0].create_topic(topic, partitions=PARTITIONS)
        await fill(clients[0], topic, plan.records)
        members = [GroupConsumer(c, group, [topic], session_timeout_ms=10_000, enable_auto_commit=False,
                                 max_bytes=FETCH_BYTES) for c in clients]
        join_ms = []
        for member in members:
            started = time.perf_counter()
            await member.start()
            join_ms.append((time.perf_counter() - started) * 1000)
        for member in members:
            await member.sync()
        assert sorted(len(m.assignment()) for m in members) == [2] * MEMBERS
        seen: set[tuple[int, int]] = set()
        started = time.perf_counter()
        counts = await asyncio.gather(*(member_loop(m, plan.records, seen) for m in members))
        elapsed = time.perf_counter() - started
        assert sum(counts) == len(seen) == plan.records, (counts, len(seen))
        commit_ms = []
        first = members[0]
        tp = first.assignment()[0]
        for i in range(COMMITS):
            started = time.perf_counter()
            await first.commit({tp: i})
            commit_ms.append((time.perf_counter() - started) * 1000)
        for member in members:
            await member.close()
        await clients[0].delete_topic(topic)
    finally:
        for client in clients:
            await client.close()
    return {"consume_records_per_s": plan.records / elapsed, "commit_ms": statistics.median(commit_ms),
            "join_ms": statistics.median(join_ms)}


async def caught_up(client: Client, group: str, total: int) -> bool:
    offsets = (await client.describe_group(group))["offsets"]
    return sum(o["committed_offset"] or 0 for o in offsets) >= total


async def one_rep_processes(url: str, rep: int, plan: Plan) -> float:
    """Records/s with ``MEMBERS`` member processes (``benchmarks.group_worker``): timed from the go
    signal until the group's committed offsets cover every record."""
    topic, group = f"bench-groups-proc-{rep}", f"bench-group-proc-{rep}"
    async with Client(url) as client:
        await client.create_topic(topic, partitions=PARTITIONS)
        await fill(client, topic, plan.records)
        elapsed, handled = await run_worker_processes(
            ["benchmarks.group_worker", url, group, topic], MEMBERS, lambda: caught_up(client, group, plan.records))
        assert handled == plan.records, (handled, plan.records)
        await client.delete_topic(topic)
    return plan.records / elapsed


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("groupsbench-", work_dir) as work, \
            NodeProcess(os.path.join(work, "data"), "--log-level", "warning") as node:
        for rep in range(plan.reps):
            print(f"[groups] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, uvloop.run(one_rep(node.url, rep, plan)))
            gather(samples, {"consume_records_per_s_member_processes":
                             uvloop.run(one_rep_processes(node.url, rep, plan))})
    figures, units = summarize_all(samples, lambda name: "ms" if name.endswith("_ms") else "records/s")
    params = {"quick": quick, **dataclasses.asdict(plan), "partitions": PARTITIONS, "members": MEMBERS,
              "record_bytes": RECORD_BYTES, "fill_batch_records": FILL_BATCH, "fetch_bytes": FETCH_BYTES,
              "commit": "after every poll", "members_are": "concurrent tasks of one client process "
              "(consume_records_per_s) and separate processes (consume_records_per_s_member_processes)"}
    return publish("groups", figures, units, out_dir=out_dir, started_at=started, params=params)
