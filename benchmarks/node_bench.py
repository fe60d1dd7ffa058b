"""End-to-end benchmark of one node through HTTP with the Python client (client and node share
the machine's cores, as they do for every peer in PEERS.md).

- produce: 100-byte records in batches of 1000 (built by the client), acks=1, a topic of 4
  partitions, ``IN_FLIGHT`` requests pipelined; records/s and MB/s of record values;
- consume: raw-batch fetch (zero-copy on the node) of the whole topic from the start, every batch
  checksum-verified; ``consume_records_per_s`` also decodes every record into a ``Record``,
  ``consume_raw_records_per_s`` counts them from the batch headers;
- latency: a fixed rate of 5,000 records/s (a batch of ``LATENCY_BATCH`` every 2 ms), one
  long-polling consumer per partition; end-to-end p50/p99/p99.9 from the record's timestamp.
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
from benchmarks.pipelined import produce_pipelined
from benchmarks.single_node import Samples, gather, publish, summarize_all
from logbroker.client import Client, FetchedBatches
from logbroker.launcher import NodeProcess
from segments.batch import ProducerRecord, decode_records, encode_batch, iter_batches

PARTITIONS = 4
RECORD_BYTES = 100
BATCH_RECORDS = 1000
IN_FLIGHT = 4
FETCH_BYTES = 4 << 20
LATENCY_RATE = 5000
LATENCY_BATCH = 10


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    produce_records: int
    latency_seconds: float


QUICK = Plan(reps=3, produce_records=300_000, latency_seconds=2.0)
FULL = Plan(reps=3, produce_records=2_000_000, latency_seconds=10.0)


async def produce(client: Client, topic: str, total: int) -> float:
    """Seconds to produce ``total`` records (client-side batch building included)."""
    payload = os.urandom(RECORD_BYTES)

    def make_batch(_n: int) -> bytes:
        return encode_batch([ProducerRecord(payload) for _ in range(BATCH_RECORDS)])

    return await produce_pipelined(client, topic, total // BATCH_RECORDS, make_batch, partitions=PARTITIONS,
                                   in_flight=IN_FLIGHT)


async def consume(client: Client, topic: str, *, decode: bool) -> tuple[float, int]:
    """Seconds to read every partition from the start, and the records read. Every batch's
    checksum is verified; with ``decode`` every record is decoded into a ``Record`` too, without
    it records are counted from the batch headers (a consumer that hands batches on as they are)."""

    async def one(partition: int) -> int:
        offset, count = 0, 0
        while True:
            fetched: FetchedBatches = await client.fetch_batches(topic, partition, offset, max_bytes=FETCH_BYTES)
            if fetched.next_offset == offset:
                return count
            view = memoryview(fetched.data)
            for position, header in iter_batches(view):
                if decode:
                    count += len(decode_records(view[position:position + header.size_bytes]))
                else:
                    count += header.record_count
            offset = fetched.next_offset

    started = time.perf_counter()
    counts = await asyncio.gather(*(one(p) for p in range(PARTITIONS)))
    return time.perf_counter() - started, sum(counts)


async def latency(client: Client, topic: str, seconds: float) -> list[float]:
    """End-to-end latencies (ms) at ``LATENCY_RATE`` records/s."""
    latencies: list[float] = []
    stop = asyncio.Event()
    starts = [await client.list_offset(topic, p, "latest") for p in range(PARTITIONS)]

    async def reader(partition: int) -> None:
        offset = starts[partition]
        while not stop.is_set():
            fetched = await client.fetch_batches(topic, partition, offset, wait_ms=500)
            now = time.time() * 1000
            for record in fetched.records(offset):
                latencies.append(now - record.timestamp - record.offset * 0)
            offset = fetched.next_offset

    readers = [asyncio.create_task(reader(p)) for p in range(PARTITIONS)]
    await asyncio.sleep(0.2)
    interval = LATENCY_BATCH / LATENCY_RATE
    payload = os.urandom(RECORD_BYTES)
    started = time.perf_counter()
    n = 0
    while time.perf_counter() - started < seconds:
        due = started + n * interval
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        ts = int(time.time() * 1000)
        batch = encode_batch([ProducerRecord(payload, timestamp=ts) for _ in range(LATENCY_BATCH)])
        await client.produce_batch(topic, n % PARTITIONS, batch, acks="1")
        n += 1
    await asyncio.sleep(0.6)
    stop.set()
    await asyncio.gather(*readers)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_rep(url: str, rep: int, plan: Plan) -> dict[str, float]:
    async with Client(url) as client:
        topic = f"bench-{rep}"
        await client.create_topic(topic, partitions=PARTITIONS, config={"flush": "interval"})
        produce_s = await produce(client, topic, plan.produce_records)
        consume_s, consumed = await consume(client, topic, decode=True)
        raw_s, raw_consumed = await consume(client, topic, decode=False)
        assert consumed == raw_consumed == plan.produce_records, (consumed, raw_consumed, plan.produce_records)
        lat_topic = f"latency-{rep}"
        await client.create_topic(lat_topic, partitions=PARTITIONS)
        latencies = await latency(client, lat_topic, plan.latency_seconds)
        await client.delete_topic(topic)
        await client.delete_topic(lat_topic)
    return {
        "produce_records_per_s": plan.produce_records / produce_s,
        "produce_mb_per_s": plan.produce_records * RECORD_BYTES / produce_s / 1e6,
        "consume_records_per_s": consumed / consume_s,
        "consume_mb_per_s": consumed * RECORD_BYTES / consume_s / 1e6,
        "consume_raw_records_per_s": raw_consumed / raw_s,
        "latency_p50_ms": statistics.median(latencies),
        "latency_p99_ms": percentile(latencies, 0.99),
        "latency_p999_ms": percentile(latencies, 0.999),
    }


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("nodebench-", work_dir) as work, \
            NodeProcess(os.path.join(work, "data"), "--log-level", "warning") as node:
        for rep in range(plan.reps):
            print(f"[node] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, uvloop.run(one_rep(node.url, rep, plan)))
    figures, units = summarize_all(samples, lambda name: "ms" if name.endswith("_ms") else
                                   "MB/s" if name.endswith("mb_per_s") else "records/s")
    params = {"quick": quick, **dataclasses.asdict(plan), "partitions": PARTITIONS, "record_bytes": RECORD_BYTES,
              "batch_records": BATCH_RECORDS, "in_flight": IN_FLIGHT, "acks": "1", "flush": "interval",
              "latency_rate_records_per_s": LATENCY_RATE, "latency_batch_records": LATENCY_BATCH}
    return publish("node", figures, units, out_dir=out_dir, started_at=started, params=params)
