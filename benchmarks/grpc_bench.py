"""The public gRPC API against the HTTP API on one node (auth on), side by side in one run.

Publish: ``PUBLISHERS`` clients, each with one request of ``BATCH`` records of ``RECORD_BYTES`` in
flight, for ``seconds`` — records/s and the p99 of a request, over gRPC ``Publish`` and over HTTP
``POST .../records`` (JSON). Subscribe: the same ``subscribe_records`` records read from offset 0,
over gRPC ``Subscribe`` (one message per record), ``SubscribeBatches`` (one message per fetch) and
HTTP fetches of up to ``FETCH_RECORDS`` (JSON); and, with the same client, a bare grpcio server
streaming a prebuilt record (``grpc_ceiling``): the most a per-record stream reaches here.
The two APIs alternate their order between repetitions. Targets (issue 18): gRPC throughput
within 2x of HTTP, p99 no worse.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import time
from typing import Any, Final

import aiohttp
import grpc
import uvloop

from benchmarks import grpc_ceiling, single_node
from benchmarks.cluster_bench import login
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from benchmarks.stats import percentile
from grpc_api import stubs
from logbroker.launcher import NodeProcess

ADMIN: Final = "bench-admin"
PASSWORD: Final = "bench-admin-password"
PUBLISHERS: Final = 4
BATCH: Final = 100
RECORD_BYTES: Final = 100
FETCH_RECORDS: Final = 1000
TOPIC: Final = "grpcbench"


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    seconds: float
    subscribe_records: int


QUICK = Plan(reps=3, seconds=3.0, subscribe_records=50_000)
FULL = Plan(reps=5, seconds=8.0, subscribe_records=200_000)


async def _drive(send: Any, seconds: float) -> tuple[float, list[float]]:
    """``PUBLISHERS`` loops of ``send()`` for ``seconds``: records/s and request latencies (ms)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def one() -> int:
        sent = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await send()
            latencies.append((time.perf_counter() - started) * 1000)
            sent += BATCH
        return sent

    started = time.perf_counter()
    counts = await asyncio.gather(*(one() for _ in range(PUBLISHERS)))
    return sum(counts) / (time.perf_counter() - started), latencies


async def one_rep(url: str, grpc_address: str, ceiling_address: str, rep: int, plan: Plan) -> dict[str, float]:
    pb, pb_grpc = stubs.load()
    value = "x" * RECORD_BYTES
    out: dict[str, float] = {}
    async with aiohttp.ClientSession() as session, grpc.aio.insecure_channel(grpc_address) as channel:
        token = await login(session, url, ADMIN, PASSWORD)
        headers = {"Authorization": f"Bearer {token}"}
        metadata = (("authorization", f"Bearer {token}"),)
        stub = pb_grpc.BrokerStub(channel)
        body = {"records": [{"value": value} for _ in range(BATCH)]}
        request = pb.PublishRequest(topic=TOPIC, records=[pb.Record(value=value.encode()) for _ in range(BATCH)])

        async def http_send() -> None:
            async with session.post(f"{url}/v1/topics/{TOPIC}/records", json=body, headers=headers) as response:
                assert response.status == 200, await response.text()
                await response.read()

        async def grpc_send() -> None:
            await stub.Publish(request, metadata=metadata)

        async def http_read(partition: int) -> int:
            offset, read = 0, 0
            while read < plan.subscribe_records:
                async with session.get(f"{url}/v1/topics/{TOPIC}/partitions/{partition}/records", headers=headers,
                                       params={"offset": offset, "max_records": FETCH_RECORDS}) as response:
                    page = await response.json()
                offset = page["next_offset"]
                read += len(page["records"])
            return read

        async def grpc_read(partition: int, subscribe: Any = stub.Subscribe) -> int:
            call = subscribe(pb.SubscribeRequest(topic=TOPIC, partition=partition, offset=0), metadata=metadata)
            read = 0
            async for _ in call:
                read += 1
                if read >= plan.subscribe_records:
                    break
            call.cancel()
            return read

        async def grpcio_ceiling_read(partition: int) -> int:
            async with grpc.aio.insecure_channel(ceiling_address) as bare:
                return await grpc_read(partition, pb_grpc.BrokerStub(bare).Subscribe)

        async def grpc_read_batches(partition: int) -> int:
            call = stub.SubscribeBatches(pb.SubscribeRequest(topic=TOPIC, partition=partition, offset=0),
                                         metadata=metadata)
            read = 0
            async for batch in call:
                read += len(batch.records)
                if read >= plan.subscribe_records:
                    break
            call.cancel()
            return read

        sends = {"http": http_send, "grpc": grpc_send}
        reads = {"http": http_read, "grpc": grpc_read, "grpc_batches": grpc_read_batches,
                 "grpcio_ceiling": grpcio_ceiling_read}
        order = ("http", "grpc") if rep % 2 == 0 else ("grpc", "http")
        for api in order:
            rate, latencies = await _drive(sends[api], plan.seconds)
            out[f"{api}_publish"] = rate
            out[f"{api}_publish_p99_ms"] = percentile(latencies, 0.99)
        for api in (*order, "grpc_batches", "grpcio_ceiling"):
            started = time.perf_counter()
            read = await reads[api](0)
            out[f"{api}_subscribe"] = read / (time.perf_counter() - started)
    return out


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("grpcbench-", work_dir) as work, grpc_ceiling.running(RECORD_BYTES) as ceiling, \
            NodeProcess(os.path.join(work, "node"), "--log-level", "warning", "--auth", "on", "--admin-user", ADMIN,
                        "--admin-password", PASSWORD) as node:
        uvloop.run(_create_topic(node.url))
        for rep in range(plan.reps):
            print(f"[grpc] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, uvloop.run(one_rep(node.url, node.grpc_address, ceiling, rep, plan)))
    figures, units = summarize_all(samples, lambda name: "ms" if name.endswith("_ms") else "records/s")
    for api, what in (("grpc", "publish"), ("grpc", "subscribe"), ("grpc_batches", "subscribe")):
        ratios = [g / h for g, h in zip(samples[f"{api}_{what}"], samples[f"http_{what}"], strict=True)]
        summarize(f"{api}_over_http_{what}_ratio", ratios, "grpc/http", figures, units)
    ratios = [g / h for g, h in zip(samples["grpc_publish_p99_ms"], samples["http_publish_p99_ms"], strict=True)]
    summarize("grpc_over_http_publish_p99_ratio", ratios, "grpc/http", figures, units)
    ratios = [g / c for g, c in zip(samples["grpc_subscribe"], samples["grpcio_ceiling_subscribe"], strict=True)]
    summarize("grpc_over_grpcio_ceiling_subscribe_ratio", ratios, "grpc/grpcio", figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "publishers": PUBLISHERS, "batch_records": BATCH,
              "record_bytes": RECORD_BYTES, "fetch_records": FETCH_RECORDS, "acks": "1", "auth": "on",
              "http_body": "JSON", "grpc_client": "grpc.aio, one channel"}
    return publish("grpc", figures, units, out_dir=out_dir, started_at=started, params=params)


async def _create_topic(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        token = await login(session, url, ADMIN, PASSWORD)
        async with session.post(f"{url}/v1/topics", json={"name": TOPIC, "partitions": 1},
                                headers={"Authorization": f"Bearer {token}"}) as response:
            assert response.status in (201, 409), await response.text()
