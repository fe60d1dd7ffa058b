"""The Kafka listener against the HTTP API on one node (auth on), side by side in one run (issue
31): librdkafka (``confluent-kafka``) producing and consuming through the Kafka protocol, and the
HTTP binary path (prebuilt batches in, raw batches out, as the Python client uses it) on the same
node, the two alternating their order between repetitions.

Produce: ``records`` records of ``RECORD_BYTES`` to one partition, ``acks=1`` (the Kafka producer
sends one record first, untimed, to log in and connect: the HTTP client's token is fetched before
its clock too); the Kafka producer
hands librdkafka ``BATCH`` records per call (``produce_batch``, as the RabbitMQ streams client's
``send_batch`` of 1,000 in the peers' figures) and librdkafka batches them as it likes (``linger.ms``
5, its default batch size); HTTP sends ``IN_FLIGHT`` requests of ``BATCH`` records at a time;
records/s from the first send to the last acknowledgement. Consume: the same records read from
offset 0, librdkafka's ``consume`` in lists of up to ``BATCH`` with every value touched, HTTP raw
fetches of ``FETCH_BYTES`` decoded to columns; the Kafka consumer's clock starts at its first records
(after its login and first fetch). Both counts are checked. The ratios are Kafka ÷ HTTP
per repetition.

Latency: records of ``RECORD_BYTES`` sent one at a time at ``LATENCY_RATE`` per second for
``latency_seconds`` (librdkafka with ``linger.ms`` 1, ``acks=1``), each stamped with the time it
was sent and read by a long-polling consumer in its own process: p50 ... max of send-to-receive,
the figure NATS JetStream's committed latency scenario gives at the same rate and size. With
``linger.ms`` 0 librdkafka sends every record as its own request, pipelined on one connection,
which the node answers one after the other, and the consumer fetches about once a record: the
listener's loop is then the limit. Measured on 2026-11-28 after decisions 0404 and 0405: at
3,000/s p50 0.5 ms and p99 1.5 to 2 ms; at 4,000/s p99 3 to 8 ms; at 5,000/s p50 0.6 to 1.9 ms
but p99 8 to 140 ms, the loop saturated (before them, at 5,000/s: p50 4 to 50 ms, p99 45 to 215
ms). 1 ms of lingering, as latency-minded Kafka producers set it, gathers about five records a
request and keeps the loop well below its limit.

The client settings (SASL PLAIN, the producers' lingering, the consumers' ``fetch.queue.backoff.ms``
10) are ``benchmarks.kafka_settings``', shared with the harness's ``logbroker-kafka`` driver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import multiprocessing
import os
import time
from typing import Any, Final

import aiohttp
import uvloop
from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks import single_node
from benchmarks.cluster_bench import login
from benchmarks.kafka_settings import (
    ADMIN,
    AUTH_ARGS,
    FETCH_BYTES,
    LATENCY_FETCH_WAIT_MS,
    LATENCY_LINGER_MS,
    LISTENER_ARGS,
    PASSWORD,
    consumer_config,
    producer_config,
)
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from benchmarks.stats import latency_figures
from logbroker.launcher import NodeProcess
from segments.batch import ProducerRecord, decode_columns, encode_batch, iter_batches

RECORD_BYTES: Final = 100
BATCH: Final = 1_000
IN_FLIGHT: Final = 4
BATCH_TYPE: Final = "application/vnd.logbroker.batch"


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    records: int
    latency_seconds: float = 3.0


QUICK = Plan(reps=3, records=100_000, latency_seconds=2.0)
FULL = Plan(reps=5, records=500_000, latency_seconds=5.0)
LATENCY_RATE: Final = 5_000  # records/s, the rate of the latency scenario's comparison with NATS
LATENCY_WAIT_S: Final = 20.0


def kafka_produce(address: str, topic: str, records: int) -> float:
    producer = Producer(producer_config(address))
    value = b"x" * RECORD_BYTES
    failed: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err:
            failed.append(err)

    producer.produce(topic, value, partition=0, on_delivery=delivered)  # log in and connect before the clock
    assert producer.flush(30) == 0 and not failed, failed[:3]
    started = time.perf_counter()
    for first in range(0, records, BATCH):
        left = min(BATCH, records - first)
        while left:  # a full local queue refuses messages (marked ``_error``): poll to drain it, send those again
            messages = [{"value": value} for _ in range(left)]
            producer.produce_batch(topic, messages, partition=0, on_delivery=delivered)
            left = sum(1 for message in messages if "_error" in message)
            producer.poll(0.01 if left else 0)
    assert producer.flush(120) == 0 and not failed, failed[:3]
    return records / (time.perf_counter() - started)


def kafka_consume(address: str, topic: str, records: int) -> float:
    consumer = Consumer(consumer_config(address, "kafkabench"))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read, touched, first = 0, 0, 0
        started = 0.0
        while read < records:
            messages = consumer.consume(BATCH, timeout=1.0)
            if messages and not started:  # logged in, connected, first fetch answered: the rate starts here
                started, first = time.perf_counter(), len(messages)
            for message in messages:
                assert message.error() is None, message.error()
                touched += len(message.value() or b"")
                read += 1
        elapsed = time.perf_counter() - started
        assert touched == read * RECORD_BYTES
        return (read - first) / elapsed
    finally:
        consumer.close()


async def http_produce(url: str, token: str, topic: str, records: int) -> float:
    batch = encode_batch([ProducerRecord(b"x" * RECORD_BYTES)] * BATCH)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": BATCH_TYPE}
    path = f"{url}/v1/topics/{topic}/records?partition=0&acks=1"
    left = records // BATCH
    async with aiohttp.ClientSession() as session:
        async def sender() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.post(path, data=batch, headers=headers) as response:
                    assert response.status == 200, await response.text()
                    await response.read()
        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(IN_FLIGHT)))
        return (records // BATCH * BATCH) / (time.perf_counter() - started)


async def http_consume(url: str, token: str, topic: str, records: int) -> float:
    headers = {"Authorization": f"Bearer {token}", "Accept": BATCH_TYPE}
    read, offset, touched = 0, 0, 0
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        while read < records:
            async with session.get(f"{url}/v1/topics/{topic}/partitions/0/records", headers=headers,
                                   params={"offset": offset, "max_bytes": FETCH_BYTES}) as response:
                assert response.status == 200, await response.text()
                data = await response.read()
            for position, header in iter_batches(data):
                columns = decode_columns(data[position:position + header.size_bytes])
                touched += sum(len(v or b"") for v in columns.values)
                read += header.record_count
                offset = header.next_offset
        elapsed = time.perf_counter() - started
    assert touched == read * RECORD_BYTES
    return read / elapsed


def kafka_latency(address: str, topic: str, rate: int, seconds: float) -> list[float]:
    """Produce-to-consume latency (ms) of each of ``rate * seconds`` records sent at ``rate``, one at
    a time (``linger.ms`` ``LATENCY_LINGER_MS``, ``acks=1``), read by a consumer in its own process
    that long-polls."""
    total = max(1, int(rate * seconds))
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    reader = context.Process(target=_latency_reader, args=(address, topic, total + 1, results), daemon=True)
    reader.start()
    try:
        producer = Producer(producer_config(address, linger_ms=LATENCY_LINGER_MS))
        producer.produce(topic, _stamped(), partition=0)  # the reader starts its clock at this one
        producer.flush(LATENCY_WAIT_S)
        assert results.get(timeout=LATENCY_WAIT_S) == "ready"
        started = time.perf_counter()
        for i in range(total):  # paced: record i leaves at started + i / rate
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, _stamped(), partition=0)
            producer.poll(0)
        assert producer.flush(LATENCY_WAIT_S) == 0
        latencies: list[float] = results.get(timeout=LATENCY_WAIT_S + seconds)
        return latencies
    finally:
        reader.join(timeout=5)
        if reader.is_alive():
            reader.kill()


def _stamped() -> bytes:
    """A 100-byte value that starts with the time it was sent (ns since the epoch)."""
    return time.time_ns().to_bytes(8, "big") + b"x" * (RECORD_BYTES - 8)


def _latency_reader(address: str, topic: str, count: int, results: Any) -> None:
    consumer = Consumer(consumer_config(address, "kafkabench-latency", **{"fetch.wait.max.ms": LATENCY_FETCH_WAIT_MS}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    latencies: list[float] = []
    deadline = time.monotonic() + LATENCY_WAIT_S * 3
    seen = 0
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)  # returns at the first record (``consume`` waits to fill its list)
        if message is None:
            continue
        now = time.time_ns()
        if seen:
            latencies.append((now - int.from_bytes((message.value() or bytes(8))[:8], "big")) / 1e6)
        else:
            results.put("ready")
        seen += 1
    consumer.close()
    results.put(latencies)


def one_rep(node: NodeProcess, token: str, rep: int, plan: Plan) -> dict[str, float]:
    out: dict[str, float] = {}
    order = ("kafka", "http") if rep % 2 == 0 else ("http", "kafka")
    for api in order:
        topic = f"kafkabench-{api}-{rep}"
        uvloop.run(_create_topic(node.url, token, topic))
        if api == "kafka":
            out["kafka_produce"] = kafka_produce(node.kafka_address, topic, plan.records)
            out["kafka_consume"] = kafka_consume(node.kafka_address, topic, plan.records)
            uvloop.run(_create_topic(node.url, token, f"{topic}-latency"))
            latencies = kafka_latency(node.kafka_address, f"{topic}-latency", LATENCY_RATE, plan.latency_seconds)
            out.update(latency_figures(f"kafka_latency_{LATENCY_RATE}", latencies))
        else:
            out["http_produce"] = uvloop.run(http_produce(node.url, token, topic, plan.records))
            out["http_consume"] = uvloop.run(http_consume(node.url, token, topic, plan.records))
    return out


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("kafkabench-", work_dir) as work, \
            NodeProcess(os.path.join(work, "node"), "--log-level", "warning", *AUTH_ARGS, *LISTENER_ARGS) as node:
        token = uvloop.run(_token(node.url))
        for rep in range(plan.reps):
            print(f"[kafka] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, one_rep(node, token, rep, plan))
    figures, units = summarize_all(samples, lambda name: "ms" if name.endswith("_ms") else "records/s")
    for what in ("produce", "consume"):
        ratios = [k / h for k, h in zip(samples[f"kafka_{what}"], samples[f"http_{what}"], strict=True)]
        summarize(f"kafka_over_http_{what}_ratio", ratios, "kafka/http", figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "record_bytes": RECORD_BYTES, "acks": "1", "auth": "on",
              "latency_rate_per_s": LATENCY_RATE,
              "latency_client": f"librdkafka, linger.ms {LATENCY_LINGER_MS}, one record at a time",
              "kafka_client": f"confluent-kafka (librdkafka), produce_batch of {BATCH}, linger.ms 5; consumer "
                              "fetch.queue.backoff.ms 10; SASL PLAIN",
              "http_client": f"aiohttp, prebuilt batches of {BATCH}, {IN_FLIGHT} in flight; raw fetches of "
                             f"{FETCH_BYTES} B decoded to columns"}
    return publish("kafka", figures, units, out_dir=out_dir, started_at=started, params=params)


async def _token(url: str) -> str:
    async with aiohttp.ClientSession() as session:
        return await login(session, url, ADMIN, PASSWORD)


async def _create_topic(url: str, token: str, topic: str) -> None:
    async with aiohttp.ClientSession() as session, \
            session.post(f"{url}/v1/topics", json={"name": topic, "partitions": 1},
                         headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status in (201, 409), await response.text()
