"""What compaction costs (decisions 0321, 0323): how fast a pass goes, and what a pass running in the
background does to the latency of the node's other traffic.

- ``cleaner_mib_per_s``: one pass of ``segments.cleaner.compact`` in this process, unthrottled, over
  a log of keyed 100-byte records (a key space of ``KEYS`` keys rewritten over and over, so nearly
  every byte is superseded): the MiB of dirty segments the pass read per second, and the share of
  bytes it kept.
- On one node, a topic of ``PARTITIONS`` partitions takes 5,000 records/s (a batch of 10 every
  2 ms, ``acks=1``) while a reader tails it; the produce call's latency and the end-to-end latency
  (produce to fetched) are measured in two phases per repetition, their order rotated:
  ``quiet`` (no compaction) and ``compacting``: a topic filled with ``dirty_mib`` of superseded
  records switched from ``delete`` to ``compact``, measured from the switch until the node's pass
  ends (``last_compaction_ms`` moves), with the node's own bound (``compaction_bytes_per_s``,
  default 32 MiB/s). The quiet phase lasts as long as the compacting one before it (or a fixed
  time first). ``*_ratio`` = compacting / quiet per repetition; ``node_pass_mib_per_s`` is the
  dirty bytes over the time from the switch to the pass's end (the maintenance round that starts
  it, up to ``maintenance_interval_ms``, included).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import struct
import tempfile
import time
from typing import Any, Final

import uvloop

from benchmarks import single_node
from benchmarks.node_bench import percentile
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from logbroker.client import Client
from logbroker.launcher import NodeProcess
from segments.batch import ProducerRecord, encode_batch, now_ms
from segments.cleaner import compact
from segments.config import MIB, LogConfig
from segments.log import PartitionLog

KEYS: Final = 10_000
BATCH_RECORDS: Final = 1000
RECORD_BYTES: Final = 100
SEGMENT_BYTES: Final = 8 * MIB
PARTITIONS: Final = 4
RATE_BATCH: Final = 10
RATE_INTERVAL_S: Final = 0.002
FIRST_QUIET_S: Final = 4.0
PASS_WAIT_S: Final = 120.0
POLL_S: Final = 0.1
# Each traffic record's value starts with when it was sent (perf_counter_ns; 0 outside a phase).
SENT_AT: Final = struct.Struct(">q")


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    reps: int
    dirty_mib: int
    cleaner_mib: int


QUICK: Final = Plan(reps=3, dirty_mib=64, cleaner_mib=128)
FULL: Final = Plan(reps=5, dirty_mib=192, cleaner_mib=512)


def keyed_batches(count: int) -> list[bytes]:
    """``count`` batches of ``BATCH_RECORDS`` keyed records cycling through ``KEYS`` keys."""
    value = os.urandom(RECORD_BYTES)
    per_round = KEYS // BATCH_RECORDS
    rounds = [encode_batch([ProducerRecord(value, key=b"key-%06d" % (r * BATCH_RECORDS + i))
                            for i in range(BATCH_RECORDS)]) for r in range(per_round)]
    return [rounds[n % per_round] for n in range(count)]


def cleaner_mib_per_s(size_mib: int, work: str) -> dict[str, float]:
    """One unthrottled pass over ``size_mib`` of keyed records, in this process."""
    directory = tempfile.mkdtemp(prefix="cleaner-", dir=work)
    log = PartitionLog.open(directory, LogConfig(flush="never", segment_bytes=SEGMENT_BYTES,
                                                 cleanup_policy="compact"))
    try:
        batches = keyed_batches(size_mib * MIB // len(keyed_batches(1)[0]))
        for batch in batches:
            log.append(batch, leader_epoch=0, flush=False)
        log.roll()
        log.flush()
        started = time.perf_counter()
        result = compact(log, now_ms=now_ms())
        seconds = time.perf_counter() - started
        assert result is not None and result.swapped, result
        return {"cleaner_mib_per_s": result.bytes_read / MIB / seconds,
                "cleaner_kept_share": result.bytes_after / result.bytes_read}
    finally:
        log.close()


class Traffic:
    """5,000 records/s into a topic with a reader tailing it; latencies kept while ``recording``."""

    def __init__(self, client: Client, topic: str) -> None:
        self.client = client
        self.topic = topic
        self.recording = False
        self.produce_ms: list[float] = []
        self.end_to_end_ms: list[float] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        starts = [await self.client.list_offset(self.topic, p, "latest") for p in range(PARTITIONS)]
        readers = [asyncio.create_task(self._read(p, starts[p])) for p in range(PARTITIONS)]
        try:
            await self._write()
        finally:
            self._stop.set()
            await asyncio.gather(*readers)

    def stop(self) -> None:
        self._stop.set()

    def take(self) -> tuple[list[float], list[float]]:
        produced, ended = self.produce_ms, self.end_to_end_ms
        self.produce_ms, self.end_to_end_ms = [], []
        return produced, ended

    async def _write(self) -> None:
        padding = os.urandom(RECORD_BYTES - SENT_AT.size)
        started, n = time.perf_counter(), 0
        while not self._stop.is_set():
            delay = started + n * RATE_INTERVAL_S - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = time.perf_counter_ns()
            value = SENT_AT.pack(sent if self.recording else 0) + padding
            batch = encode_batch([ProducerRecord(value) for _ in range(RATE_BATCH)])
            await self.client.produce_batch(self.topic, n % PARTITIONS, batch, acks="1")
            if self.recording:
                self.produce_ms.append((time.perf_counter_ns() - sent) / 1e6)
            n += 1

    async def _read(self, partition: int, offset: int) -> None:
        while not self._stop.is_set():
            fetched = await self.client.fetch_batches(self.topic, partition, offset, wait_ms=200)
            now = time.perf_counter_ns()
            for record in fetched.records(offset):
                (sent,) = SENT_AT.unpack_from(record.value or b"")
                if sent and self.recording:
                    self.end_to_end_ms.append((now - sent) / 1e6)
            offset = fetched.next_offset


def _figures(phase: str, produced: list[float], ended: list[float]) -> dict[str, float]:
    return {f"{phase}_produce_p50_ms": percentile(produced, 0.5), f"{phase}_produce_p99_ms": percentile(produced, 0.99),
            f"{phase}_end_to_end_p50_ms": percentile(ended, 0.5), f"{phase}_end_to_end_p99_ms": percentile(ended, 0.99)}


async def _fill_dirty(client: Client, topic: str, size_mib: int) -> int:
    await client.create_topic(topic, partitions=1, config={"cleanup_policy": "delete", "segment_bytes": SEGMENT_BYTES,
                                                           "retention_ms": -1, "flush": "interval"})
    batches = keyed_batches(1)
    count = size_mib * MIB // len(batches[0])
    batches = keyed_batches(count)
    for batch in batches:
        await client.produce_batch(topic, 0, batch, acks="1")
    return sum(len(b) for b in batches)


async def _last_compaction_ms(client: Client, topic: str) -> int:
    described = await client.describe_topic(topic)
    return int(described["partitions"][0].get("last_compaction_ms") or 0)


async def _phase(traffic: Traffic, seconds: float) -> tuple[list[float], list[float]]:
    traffic.take()
    traffic.recording = True
    await asyncio.sleep(seconds)
    traffic.recording = False
    await asyncio.sleep(0.3)
    return traffic.take()


async def _compacting(client: Client, traffic: Traffic, topic: str, dirty_bytes: int) -> tuple[dict[str, float], float]:
    traffic.take()
    traffic.recording = True
    switched = time.perf_counter()
    await client.alter_topic_config(topic, {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.01})
    while await _last_compaction_ms(client, topic) == 0:
        assert time.perf_counter() - switched < PASS_WAIT_S, f"no compaction pass of {topic} in {PASS_WAIT_S} s"
        await asyncio.sleep(POLL_S)
    seconds = time.perf_counter() - switched
    traffic.recording = False
    await asyncio.sleep(0.3)
    produced, ended = traffic.take()
    return {**_figures("compacting", produced, ended), "node_pass_mib_per_s": dirty_bytes / MIB / seconds}, seconds


async def one_rep(url: str, rep: int, plan: Plan) -> dict[str, float]:
    async with Client(url) as client:
        hot, cold = f"traffic-{rep}", f"dirty-{rep}"
        await client.create_topic(hot, partitions=PARTITIONS, config={"flush": "interval"})
        dirty_bytes = await _fill_dirty(client, cold, plan.dirty_mib)
        traffic = Traffic(client, hot)
        running = asyncio.create_task(traffic.run())
        try:
            await asyncio.sleep(1.0)
            figures: dict[str, float] = {}
            if rep % 2 == 0:
                figures.update(_figures("quiet", *await _phase(traffic, FIRST_QUIET_S)))
                compacting, _ = await _compacting(client, traffic, cold, dirty_bytes)
                figures.update(compacting)
            else:
                compacting, seconds = await _compacting(client, traffic, cold, dirty_bytes)
                figures.update(compacting)
                figures.update(_figures("quiet", *await _phase(traffic, max(seconds, FIRST_QUIET_S))))
        finally:
            traffic.stop()
            await running
        await client.delete_topic(hot)
        await client.delete_topic(cold)
    return figures


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("compactbench-", work_dir) as work, \
            NodeProcess(os.path.join(work, "node"), "--log-level", "warning") as node:
        for rep in range(plan.reps):
            print(f"[compaction] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, uvloop.run(one_rep(node.url, rep, plan)))
            gather(samples, cleaner_mib_per_s(plan.cleaner_mib, work))
    figures, units = summarize_all(samples, _unit)
    for name in [n for n in samples if n.startswith("compacting_")]:
        base = name.removeprefix("compacting_")
        ratios = [a / b for a, b in zip(samples[name], samples[f"quiet_{base}"], strict=True)]
        summarize(f"{base.removesuffix('_ms')}_ratio", ratios, "compacting/quiet", figures, units)
    params: dict[str, Any] = {"quick": quick, **dataclasses.asdict(plan), "keys": KEYS, "record_bytes": RECORD_BYTES,
                              "segment_bytes": SEGMENT_BYTES, "traffic_records_per_s": RATE_BATCH / RATE_INTERVAL_S,
                              "traffic_partitions": PARTITIONS, "acks": "1"}
    return publish("compaction", figures, units, out_dir=out_dir, started_at=started, params=params)


def _unit(name: str) -> str:
    if name.endswith("_mib_per_s"):
        return "MiB/s"
    if name.endswith("_share"):
        return "share"
    return "ms"
