"""Nearest-replica reads and nearest-leader writes: what reading from the in-sync replica in the
reader's rack saves when the leader is in another rack, behind a delay, and what a topic's
``leader_racks`` saves a producer in its rack.

Three nodes on etcd: nodes 1 and 2 in rack ``a``, node 3 in rack ``b``; a topic of three partitions,
replication factor 3; the one measured is led from rack ``a``. The reader is in rack ``b``. Between racks a
user-space TCP proxy delays every chunk by ``DELAY_MS`` each way (this machine has no ``tc
netem``; /work/shared/FAULTS.md). The same fetch (``FETCH_RECORDS`` records from offset 0) is
timed ``fetches`` times through the proxy to the leader (no rack: what a reader gets today) and
straight to node 3 with ``?rack=b`` (served by rack b's replica), alternating, one at a time.
Figures: p50 and p99 of each, and the saving (leader minus rack replica).

Writes: two topics of three partitions, replication factor 3, one with ``leader_racks=["b"]``
(led by node 3, in the producer's rack) and one with ``leader_racks=["a"]`` (led from rack a). A
producer in rack b sends one record of ``PRODUCE_VALUE_BYTES`` to partition 0 of each, straight
to node 3 for the first and through the proxy to the rack-a leader for the second, alternating,
one at a time, ``produces`` times each with ``acks=1`` and again with ``acks=all``. Only the
producer's link crosses the proxy: replication between the nodes is not delayed, so with
``acks=all`` both topics wait for their followers over an undelayed link (in a real deployment
a leader in rack b still waits for its rack-a follower; what ``leader_racks`` saves there is the
producer's round trip, as here). Figures: p50 and p99 of each, and ``produce_saved_*``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import time
from collections.abc import AsyncIterator
from typing import Final

import aiohttp
import uvloop

from benchmarks import cluster_nodes, single_node
from benchmarks.cluster_bench import login
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from benchmarks.stats import percentile

RACKS: Final = {1: "a", 2: "a", 3: "b"}
DELAY_MS: Final = 25.0
FETCH_RECORDS: Final = 100
RECORDS: Final = 1_000
TOPIC: Final = "racksbench"
NEAR_TOPIC: Final = "racksbench.near"  # leader_racks ["b"]: led in the producer's rack
FAR_TOPIC: Final = "racksbench.far"  # leader_racks ["a"]: led across the proxy
PRODUCE_VALUE_BYTES: Final = 100
PIPE_BYTES: Final = 64 * 1024


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    fetches: int
    produces: int = 0


QUICK = Plan(reps=2, fetches=60, produces=60)
FULL = Plan(reps=3, fetches=300, produces=300)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay_s`` late (order kept: one chunk in the
    air at a time per direction; bounded to ``PIPE_BYTES`` a read)."""
    with contextlib.suppress(ConnectionError, OSError):
        while chunk := await reader.read(PIPE_BYTES):
            await asyncio.sleep(delay_s)
            writer.write(chunk)
            await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def delaying_proxy(target: str, delay_ms: float) -> AsyncIterator[str]:
    """A proxy on a free loopback port to ``target`` (host:port), ``delay_ms`` each way."""
    host, port = target.rsplit(":", 1)

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(_pipe(client_reader, upstream_writer, delay_ms / 1000),
                             _pipe(upstream_reader, client_writer, delay_ms / 1000))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def _partition_led_from_rack_a(session: aiohttp.ClientSession, urls: dict[int, str],
                                     headers: dict[str, str]) -> int:
    async with session.get(f"{urls[1]}/v1/topics/{TOPIC}", headers=headers) as response:
        partitions = (await response.json())["partitions"]
    return int(next(p["partition"] for p in partitions if RACKS.get(p["leader"]) == "a"))


async def _admin(session: aiohttp.ClientSession, url: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {await login(session, url, cluster_nodes.ADMIN, cluster_nodes.PASSWORD)}"}


async def one_rep(urls: dict[int, str], plan: Plan) -> dict[str, float]:
    async with aiohttp.ClientSession() as session:
        headers = await _admin(session, urls[1])
        partition = await _partition_led_from_rack_a(session, urls, headers)
        async with session.get(f"{urls[1]}/v1/topics/{TOPIC}", headers=headers) as response:
            leader = (await response.json())["partitions"][partition]["leader"]
        path = f"/v1/topics/{TOPIC}/partitions/{partition}/records?offset=0&max_records={FETCH_RECORDS}"
        async with delaying_proxy(urls[leader].removeprefix("http://"), DELAY_MS) as proxied:
            targets = {"leader": f"http://{proxied}{path}", "rack_replica": f"{urls[3]}{path}&rack=b"}
            latencies: dict[str, list[float]] = {name: [] for name in targets}
            for _ in range(plan.fetches):
                for name, url in targets.items():
                    started = time.perf_counter()
                    async with session.get(url, headers=headers) as response:
                        page = await response.json()
                    latencies[name].append((time.perf_counter() - started) * 1000)
                    assert len(page["records"]) == FETCH_RECORDS, page
    out: dict[str, float] = {}
    for name, values in latencies.items():
        out[f"{name}_fetch_p50_ms"] = percentile(values, 0.5)
        out[f"{name}_fetch_p99_ms"] = percentile(values, 0.99)
    return out


async def _leader(session: aiohttp.ClientSession, url: str, headers: dict[str, str], topic: str) -> int:
    async with session.get(f"{url}/v1/topics/{topic}", headers=headers) as response:
        return int((await response.json())["partitions"][0]["leader"])


async def one_produce_rep(urls: dict[int, str], plan: Plan) -> dict[str, float]:
    """Produce latency from rack b: to the near topic's leader (node 3, direct) against the far
    topic's leader (rack a, through the proxy), alternating, for ``acks=1`` then ``acks=all``."""
    value = "v" * PRODUCE_VALUE_BYTES
    out: dict[str, float] = {}
    async with aiohttp.ClientSession() as session:
        headers = await _admin(session, urls[1])
        near, far = await _leader(session, urls[1], headers, NEAR_TOPIC), await _leader(session, urls[1], headers,
                                                                                         FAR_TOPIC)
        assert RACKS[near] == "b" and RACKS[far] == "a", (near, far)
        async with delaying_proxy(urls[far].removeprefix("http://"), DELAY_MS) as proxied:
            for acks in ("1", "all"):
                targets = {"near": f"{urls[near]}/v1/topics/{NEAR_TOPIC}/records?acks={acks}",
                           "far": f"http://{proxied}/v1/topics/{FAR_TOPIC}/records?acks={acks}"}
                latencies: dict[str, list[float]] = {name: [] for name in targets}
                for _ in range(plan.produces):
                    for name, url in targets.items():
                        started = time.perf_counter()
                        async with session.post(url, headers=headers,
                                                json={"records": [{"value": value, "partition": 0}]}) as response:
                            assert response.status == 200, await response.text()
                            await response.read()
                        latencies[name].append((time.perf_counter() - started) * 1000)
                suffix = "acks1" if acks == "1" else "acksall"
                for name, values in latencies.items():
                    out[f"{name}_leader_produce_{suffix}_p50_ms"] = percentile(values, 0.5)
                    out[f"{name}_leader_produce_{suffix}_p99_ms"] = percentile(values, 0.99)
    return out


async def _prepare_produce(session: aiohttp.ClientSession, urls: dict[int, str], headers: dict[str, str]) -> None:
    for topic, rack in ((NEAR_TOPIC, "b"), (FAR_TOPIC, "a")):
        async with session.post(f"{urls[1]}/v1/topics", headers=headers, json={
                "name": topic, "partitions": 3, "replication_factor": 3, "config": {"leader_racks": [rack]}}
                                ) as response:
            assert response.status == 201, await response.text()
        for _ in range(600):  # partition 0 led in its rack (bounded: 60 s)
            leader = await _leader(session, urls[1], headers, topic)
            if RACKS.get(leader) == rack:
                break
            await asyncio.sleep(0.1)


async def _prepare(urls: dict[int, str]) -> None:
    async with aiohttp.ClientSession() as session:
        headers = await _admin(session, urls[1])
        for _ in range(600):  # every node alive (bounded: 60 s)
            async with session.get(f"{urls[1]}/v1/cluster", headers=headers) as response:
                if sum(1 for n in (await response.json())["nodes"] if n["alive"]) == len(urls):
                    break
            await asyncio.sleep(0.1)
        async with session.post(f"{urls[1]}/v1/topics", headers=headers,
                                json={"name": TOPIC, "partitions": 3, "replication_factor": 3}) as response:
            assert response.status == 201, await response.text()
        partition = await _partition_led_from_rack_a(session, urls, headers)
        records = [{"value": f"record-{n:06d}-" + "x" * 80, "partition": partition} for n in range(RECORDS)]
        async with session.post(f"{urls[1]}/v1/topics/{TOPIC}/records?acks=all", headers=headers,
                                json={"records": records}) as response:
            assert response.status == 200, await response.text()
        await _prepare_produce(session, urls, headers)
        await asyncio.sleep(1.0)  # node 3 learns the high watermark within 0.5 s


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("racksbench-", work_dir) as work, \
            cluster_nodes.running_cluster(work, racks=RACKS) as nodes:
        urls = {n.node_id: n.url for n in nodes}
        uvloop.run(_prepare(urls))
        for rep in range(plan.reps):
            print(f"[racks] repetition {rep + 1}/{plan.reps}", flush=True)
            gather(samples, uvloop.run(one_rep(urls, plan)))
            if plan.produces:
                gather(samples, uvloop.run(one_produce_rep(urls, plan)))
    figures, units = summarize_all(samples, lambda name: "ms")
    for q in ("p50", "p99"):
        saved = [a - b for a, b in zip(samples[f"leader_fetch_{q}_ms"], samples[f"rack_replica_fetch_{q}_ms"],
                                       strict=True)]
        summarize(f"saved_{q}_ms", saved, "ms", figures, units)
        for suffix in ("acks1", "acksall") if plan.produces else ():
            saved = [a - b for a, b in zip(samples[f"far_leader_produce_{suffix}_{q}_ms"],
                                           samples[f"near_leader_produce_{suffix}_{q}_ms"], strict=True)]
            summarize(f"produce_saved_{suffix}_{q}_ms", saved, "ms", figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "racks": {str(k): v for k, v in RACKS.items()},
              "delay_ms_each_way": DELAY_MS, "fetch_records": FETCH_RECORDS, "records": RECORDS,
              "produce_value_bytes": PRODUCE_VALUE_BYTES,
              "delay": "user-space TCP proxy between the client (rack b) and a node in rack a; replication "
                       "between nodes is not delayed"}
    return publish("racks", figures, units, out_dir=out_dir, started_at=started, params=params)
