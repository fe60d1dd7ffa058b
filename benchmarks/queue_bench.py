"""Queue benchmark: receive + ack throughput of competing workers against one node.

A queue of ``PARTITIONS`` partitions is filled with 100-byte messages (prebuilt batches of 1000,
as a producer sends them), then ``WORKERS`` workers (``QueueConsumer``s, concurrent tasks of one
client process, each with its own connection pool; msgpack on the wire) each loop: receive up to
``RECEIVE_BATCH`` messages, ack them all in one call, until every message is acked.
``messages_per_s`` is messages acked per second of that drain; ``receive_ms``/``ack_ms`` are the
median call latencies. ``messages_per_s_worker_processes`` is the same drain by ``WORKERS`` worker
processes (``benchmarks.queue_worker``), measured in the same run. The node and the clients share
the machine's 2 cores. Every message is checked to be acked exactly once.
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
from logbroker.client import Client, QueueConsumer
from logbroker.launcher import NodeProcess
from segments.batch import ProducerRecord, encode_batch

PARTITIONS = 4
WORKERS = 4
RECEIVE_BATCH = 100
RECORD_BYTES = 100
FILL_BATCH = 1000
VISIBILITY_MS = 60_000


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    messages: int


QUICK = Plan(reps=3, messages=40_000)
FULL = Plan(reps=3, messages=200_000)


async def fill(client: Client, queue: str, total: int) -> None:
    payload = os.urandom(RECORD_BYTES)
    for n in range(total // FILL_BATCH):
        batch = encode_batch([ProducerRecord(payload) for _ in range(FILL_BATCH)])
        await client.produce_batch(queue, n % PARTITIONS, batch)


async def worker(url: str, queue: str, total: int, acked: set[tuple[int, int]],
                 receive_ms: list[float], ack_ms: list[float]) -> int:
    count = 0
    async with Client(url) as client:
        consumer = QueueConsumer(client, queue, max_messages=RECEIVE_BATCH, visibility_timeout_ms=VISIBILITY_MS,
                                 wait_ms=100)
        while len(acked) < total:
            started = time.perf_counter()
            messages = await consumer.receive()
            receive_ms.append((time.perf_counter() - started) * 1000)
            if not messages:
                continue
            started = time.perf_counter()
            result = await consumer.ack(messages)
            ack_ms.append((time.perf_counter() - started) * 1000)
            assert result["acked"] == len(messages) and not result["failed"], result
            for m in messages:
                key = (m.partition, m.offset)
                assert key not in acked, f"{key} acked twice"
                acked.add(key)
            count += len(messages)
    return count


async def one_rep(url: str, rep: int, plan: Plan) -> dict[str, float]:
    queue = f"bench-queue-{rep}"
    async with Client(url) as client:
        await client.create_topic(queue, partitions=PARTITIONS, kind="queue")
        await fill(client, queue, plan.messages)
    acked: set[tuple[int, int]] = set()
    receive_ms: list[float] = []
    ack_ms: list[float] = []
    started = time.perf_counter()
    counts = await asyncio.gather(*(worker(url, queue, plan.messages, acked, receive_ms, ack_ms)
                                    for _ in range(WORKERS)))
    elapsed = time.perf_counter() - started
    assert sum(counts) == len(acked) == plan.messages, (sum(counts), len(acked))
    async with Client(url) as client:
        await client.delete_topic(queue)
    return {"messages_per_s": plan.messages / elapsed, "receive_ms": statistics.median(receive_ms),
            "ack_ms": statistics.median(ack_ms)}


async def drained(client: Client, queue: str, total: int) -> bool:
    state = await client.describe_queue(queue)
    return sum(int(p["done_below"]) for p in state["partitions"]) >= total


async def one_rep_processes(url: str, rep: int, plan: Plan) -> float:
    """Messages/s with ``WORKERS`` worker processes (``benchmarks.queue_worker``): timed from the
    go signal until the node reports every message acked."""
    queue = f"bench-queue-proc-{rep}"
    async with Client(url) as client:
        await client.create_topic(queue, partitions=PARTITIONS, kind="queue")
        await fill(client, queue, plan.messages)
        elapsed, handled = await run_worker_processes(
            ["benchmarks.queue_worker", url, queue], WORKERS, lambda: drained(client, queue, plan.messages))
        assert handled == plan.messages, (handled, plan.messages)
        await client.delete_topic(queue)
    return plan.messages / elapsed


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("queuebench-", work_dir) as work, \
            NodeProcess(os.path.join(work, "data"), "--log-level", "warning") as node:
        for rep in range(plan.reps):
            print(f"[queue] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, uvloop.run(one_rep(node.url, rep, plan)))
            gather(samples, {"messages_per_s_worker_processes": uvloop.run(one_rep_processes(node.url, rep, plan))})
    figures, units = summarize_all(samples, lambda name: "ms" if name.endswith("_ms") else "messages/s")
    params = {"quick": quick, **dataclasses.asdict(plan), "partitions": PARTITIONS, "workers": WORKERS,
              "receive_batch": RECEIVE_BATCH, "record_bytes": RECORD_BYTES, "visibility_timeout_ms": VISIBILITY_MS,
              "flush": "interval", "workers_are": "concurrent tasks of one client process (messages_per_s) and "
              "separate processes (messages_per_s_worker_processes)"}
    return publish("queue", figures, units, out_dir=out_dir, started_at=started, params=params)
