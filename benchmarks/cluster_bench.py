"""The costs of the cluster (issue 15): three nodes on a real etcd, auth on, the internal RPC over
mutual TLS.

- forwarding: one partition of a 3-partition, replication-factor-1 topic, produced to and fetched
  from by ``CLIENTS`` concurrent clients for a bounded time, each client sending to the partition's
  leader (``straight``) or to a node that is not its leader (``through``, which forwards over the
  internal RPC). Produce: JSON bodies and prebuilt binary batches of ``BATCH_RECORDS`` records of
  ``RECORD_BYTES`` B; fetch: JSON and raw batches (``Accept: application/vnd.logbroker.batch``),
  ``BATCH_RECORDS`` records a request. Figures per operation and mode: records/s and request
  latency p50/p99; ``*_ratio`` = through / straight.
- metadata, etcd against the local coordinator (a lone node, the same auth settings): create a
  topic of one partition, a non-admin user's authenticated read (token check and ACL check, ``GET
  .../offsets?at=latest`` on the partition's leader, so nothing is forwarded), an ACL grant, a user
  creation (scrypt's cost is in both). One request at a time; p50/p99 per repetition and
  ``*_ratio`` = etcd / local.

Each repetition alternates which side goes first; figures are medians of the repetitions with
min and max (DESIGN §9). Requests are pinned to one node's URL (the client library would route
them to the leader itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import uvloop

from benchmarks import cluster_nodes, single_node
from benchmarks.profiling import Profiler
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from benchmarks.stats import percentiles
from segments.batch import ProducerRecord, encode_batch

RECORD_BYTES: Final = 100
BATCH_RECORDS: Final = 100
PARTITIONS: Final = 3
CLIENTS: Final = 4
FETCH_BYTES: Final = 16 * 1024  # one batch of BATCH_RECORDS records a fetch
BATCH_TYPE: Final = "application/vnd.logbroker.batch"
READER: Final = "bench-reader"
READER_PASSWORD: Final = "bench-reader-password"
READY_TIMEOUT_S: Final = 60.0
REQUEST_TIMEOUT_S: Final = 30.0
OPERATIONS: Final = ("produce_json", "produce_batch", "fetch_json", "fetch_raw")
METADATA: Final = ("create_topic", "read_check", "acl_grant", "create_user")


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    seconds: float  # per operation and mode
    metadata_calls: int  # per metadata operation, coordinator and repetition
    read_checks: int


QUICK = Plan(reps=3, seconds=2.0, metadata_calls=20, read_checks=200)
FULL = Plan(reps=3, seconds=6.0, metadata_calls=60, read_checks=1000)


class Pinned:
    """HTTP calls to one node's URL with a bearer token; a 4xx/5xx raises."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str) -> None:
        self.session, self.url = session, url
        self.auth = {"Authorization": f"Bearer {token}"}

    async def call(self, method: str, path: str, *, data: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[dict[str, str], bytes]:
        async with self.session.request(method, self.url + path, data=data,
                                        headers={**self.auth, **(headers or {})}) as response:
            body = await response.read()
            if response.status >= 400:
                raise RuntimeError(f"{method} {self.url}{path}: {response.status} {body[:300]!r}")
            return dict(response.headers), body

    async def json(self, method: str, path: str, body: Any = None) -> Any:
        _, answer = await self.call(method, path, data=None if body is None else json.dumps(body).encode(),
                                    headers={"Content-Type": "application/json"})
        return json.loads(answer) if answer else None


async def login(session: aiohttp.ClientSession, url: str, username: str, password: str) -> str:
    async with session.post(url + "/v1/auth/token", json={"username": username, "password": password}) as response:
        answer = await response.json()
        if response.status != 200:
            raise RuntimeError(f"login of {username} at {url}: {response.status} {answer}")
        return str(answer["access_token"])


async def wait_for_cluster(node: Pinned, size: int) -> None:
    """Until ``node`` lists ``size`` nodes alive (bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        nodes = (await node.json("GET", "/v1/cluster"))["nodes"]
        if sum(1 for n in nodes if n["alive"]) >= size:
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"the cluster did not list {size} nodes alive within {READY_TIMEOUT_S} s: {nodes}")
        await asyncio.sleep(0.1)


# ---- forwarding --------------------------------------------------------------------------------

Request = Callable[[Pinned, int], Awaitable[int]]  # (node, client) -> records moved


def operations(topic: str, partition: int, high_watermark: Callable[[], int]) -> dict[str, Request]:
    """The four operations on ``partition``: each call moves ``BATCH_RECORDS`` records. Fetches
    read the log from a point that moves on per client and wraps at ``high_watermark()``."""
    value = "v" * RECORD_BYTES
    json_body = json.dumps({"records": [{"value": value, "partition": partition}
                                        for _ in range(BATCH_RECORDS)]}).encode()
    batch = encode_batch([ProducerRecord(value.encode()) for _ in range(BATCH_RECORDS)])
    records = f"/v1/topics/{topic}/records"
    fetch = f"/v1/topics/{topic}/partitions/{partition}/records"
    positions: dict[int, int] = {}

    async def produce_json(node: Pinned, _client: int) -> int:
        _, body = await node.call("POST", records, data=json_body, headers={"Content-Type": "application/json"})
        return len(json.loads(body)["offsets"])

    async def produce_batch(node: Pinned, _client: int) -> int:
        await node.call("POST", f"{records}?partition={partition}", data=batch, headers={"Content-Type": BATCH_TYPE})
        return BATCH_RECORDS

    def start(client: int) -> int:
        end = high_watermark()
        offset = positions.get(client, client * end // CLIENTS // BATCH_RECORDS * BATCH_RECORDS)
        return 0 if offset + BATCH_RECORDS > end else offset

    async def fetch_json(node: Pinned, client: int) -> int:
        offset = start(client)
        _, body = await node.call("GET", f"{fetch}?offset={offset}&max_records={BATCH_RECORDS}&max_bytes={FETCH_BYTES}")
        count = len(json.loads(body)["records"])
        positions[client] = offset + count
        return count

    async def fetch_raw(node: Pinned, client: int) -> int:
        offset = start(client)
        headers, _ = await node.call("GET", f"{fetch}?offset={offset}&max_bytes={FETCH_BYTES}",
                                     headers={"Accept": BATCH_TYPE})
        positions[client] = int(headers["X-LogBroker-Next-Offset"])
        return positions[client] - offset

    return {"produce_json": produce_json, "produce_batch": produce_batch, "fetch_json": fetch_json,
            "fetch_raw": fetch_raw}


async def drive(node: Pinned, request: Request, seconds: float) -> tuple[float, list[float]]:
    """``CLIENTS`` clients calling ``request`` back to back for ``seconds``: records/s and every
    request's latency (ms)."""
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def client(number: int) -> int:
        moved = 0
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            moved += await request(node, number)
            latencies.append((time.perf_counter() - sent) * 1000)
        return moved

    moved = await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    elapsed = time.perf_counter() - started
    assert sum(moved) > 0, "no records moved"
    return sum(moved) / elapsed, latencies


async def forwarding(session: aiohttp.ClientSession, urls: list[str], token: str, plan: Plan,
                     samples: Samples) -> None:
    nodes = [Pinned(session, url, token) for url in urls]
    topic = "forwarding"
    created = await nodes[0].json("POST", "/v1/topics", {"name": topic, "partitions": PARTITIONS,
                                                         "replication_factor": 1, "config": {"flush": "interval"}})
    partition = 0
    leader = next(p["leader"] for p in created["partitions"] if p["partition"] == partition)
    other = next(n for n in range(1, len(urls) + 1) if n != leader)
    modes = {"straight": nodes[leader - 1], "through": nodes[other - 1]}
    offsets_path = f"/v1/topics/{topic}/partitions/{partition}/offsets?at=latest"
    end = [0]
    requests = operations(topic, partition, lambda: end[0])
    for rep in range(plan.reps):
        order = ("straight", "through") if rep % 2 == 0 else ("through", "straight")
        print(f"[cluster] forwarding, repetition {rep + 1}/{plan.reps} ({' then '.join(order)}; "
              f"leader {leader}, through {other})", flush=True)
        for name in OPERATIONS:
            end[0] = int((await modes["straight"].json("GET", offsets_path))["offset"])
            for mode in order:
                rate, latencies = await drive(modes[mode], requests[name], plan.seconds)
                p50, p99 = percentiles(latencies, (0.5, 0.99))
                gather(samples, {f"{name}_{mode}_records_per_s": rate, f"{name}_{mode}_p50_ms": p50,
                                 f"{name}_{mode}_p99_ms": p99})


# ---- metadata ----------------------------------------------------------------------------------

async def timed(calls: int, one: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    """p50 and p99 (ms) of ``calls`` calls of ``one(n)``, one at a time."""
    latencies = []
    for n in range(calls):
        started = time.perf_counter()
        await one(n)
        latencies.append((time.perf_counter() - started) * 1000)
    p50, p99 = percentiles(latencies, (0.5, 0.99))
    return p50, p99


@dataclasses.dataclass
class MetadataTarget:
    """Where one coordinator's metadata calls go: ``admin`` for the writes, ``reader`` (the
    non-admin user's token) on the node that leads the read topic's partition."""

    admin: Pinned
    reader: Pinned
    read_topic: str


async def metadata_target(session: aiohttp.ClientSession, urls: list[str], admin_token: str) -> MetadataTarget:
    admin = Pinned(session, urls[0], admin_token)
    await admin.json("POST", "/v1/users", {"username": READER, "password": READER_PASSWORD, "role": "user"})
    created = await admin.json("POST", "/v1/topics", {"name": "read-check", "partitions": 1, "replication_factor": 1})
    await admin.json("PUT", "/v1/topics/read-check/acl", {"user": READER, "permissions": ["read"]})
    leader = created["partitions"][0]["leader"]
    reader_token = await login(session, urls[0], READER, READER_PASSWORD)
    return MetadataTarget(admin, Pinned(session, urls[leader - 1] if len(urls) > 1 else urls[0], reader_token),
                          "read-check")


async def metadata_rep(target: MetadataTarget, rep: int, plan: Plan, coordinator: str) -> dict[str, float]:
    admin, calls = target.admin, plan.metadata_calls
    figures: dict[str, float] = {}

    async def create_topic(n: int) -> object:
        return await admin.json("POST", "/v1/topics", {"name": f"meta-{rep}-{n}", "partitions": 1,
                                                       "replication_factor": 1})

    async def read_check(_n: int) -> object:
        return await target.reader.call("GET", f"/v1/topics/{target.read_topic}/partitions/0/offsets?at=latest")

    async def acl_grant(n: int) -> object:
        permissions = ["read", "write"] if n % 2 == 0 else ["read"]
        return await admin.json("PUT", f"/v1/topics/meta-{rep}-{n}/acl", {"user": READER, "permissions": permissions})

    async def create_user(n: int) -> object:
        return await admin.json("POST", "/v1/users", {"username": f"user-{rep}-{n}", "password": READER_PASSWORD,
                                                      "role": "user"})

    for name, one, count in (("create_topic", create_topic, calls), ("read_check", read_check, plan.read_checks),
                             ("acl_grant", acl_grant, calls), ("create_user", create_user, calls)):
        p50, p99 = await timed(count, one)
        figures[f"{name}_{coordinator}_p50_ms"], figures[f"{name}_{coordinator}_p99_ms"] = p50, p99
    return figures


# ---- the run -----------------------------------------------------------------------------------

async def measure(cluster_urls: list[str], local_url: str, plan: Plan, samples: Samples,
                  profiler: Profiler | None, pids: list[int]) -> None:
    connector = aiohttp.TCPConnector(limit=64)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        token = await login(session, cluster_urls[0], cluster_nodes.ADMIN, cluster_nodes.PASSWORD)
        await wait_for_cluster(Pinned(session, cluster_urls[0], token), len(cluster_urls))
        if profiler is not None:  # the forwarding part only; the forwarding node's profile tells its cost
            for node_id, pid in enumerate(pids, start=1):
                profiler.record(f"cluster-node-{node_id}", pid)
        try:
            await forwarding(session, cluster_urls, token, plan, samples)
        finally:
            if profiler is not None:
                for path in profiler.stop():
                    print(f"[cluster] profile: {path.removesuffix('.txt')}.top.txt", flush=True)
        local_token = await login(session, local_url, cluster_nodes.ADMIN, cluster_nodes.PASSWORD)
        targets = {"etcd": await metadata_target(session, cluster_urls, token),
                   "local": await metadata_target(session, [local_url], local_token)}
        for rep in range(plan.reps):
            order = ("etcd", "local") if rep % 2 == 0 else ("local", "etcd")
            print(f"[cluster] metadata, repetition {rep + 1}/{plan.reps} ({' then '.join(order)})", flush=True)
            for coordinator in order:
                gather(samples, await metadata_rep(targets[coordinator], rep, plan, coordinator))


def ratios(samples: Samples, figures: dict[str, float], units: dict[str, str]) -> None:
    """Per repetition, through / straight and etcd / local, summarized like the figures:
    ``<op>_throughput_ratio`` (records/s), ``<op>_p50_ratio`` and ``<op>_p99_ratio`` (latency)."""
    pairs = [(op, ("through", "straight"), figure, ratio) for op in OPERATIONS
             for figure, ratio in (("records_per_s", "throughput"), ("p50_ms", "p50"), ("p99_ms", "p99"))]
    pairs += [(op, ("etcd", "local"), figure, ratio) for op in METADATA
              for figure, ratio in (("p50_ms", "p50"), ("p99_ms", "p99"))]
    for op, (top, bottom), figure, ratio in pairs:
        values = [a / b for a, b in zip(samples[f"{op}_{top}_{figure}"], samples[f"{op}_{bottom}_{figure}"],
                                        strict=True)]
        summarize(f"{op}_{ratio}_ratio", values, f"{top}/{bottom}", figures, units)


def run(*, quick: bool, out_dir: str | None, work_dir: str | None, profile_dir: str | None = None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    profiler = Profiler(profile_dir) if profile_dir else None
    with single_node.work_dir("clusterbench-", work_dir) as work, \
            cluster_nodes.running_cluster(work) as nodes, cluster_nodes.running_local_node(work) as local:
        uvloop.run(measure([n.url for n in nodes], local.url, plan, samples, profiler, [n.pid for n in nodes]))
    figures, units = summarize_all(samples, lambda name: "ms" if name.endswith("_ms") else "records/s")
    ratios(samples, figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "nodes": len(nodes), "partitions": PARTITIONS,
              "replication_factor": 1, "record_bytes": RECORD_BYTES, "batch_records": BATCH_RECORDS,
              "clients": CLIENTS, "acks": "1", "auth": "on", "internal_rpc": "mutual TLS + cluster token",
              "lease_ttl_ms": cluster_nodes.LEASE_TTL_MS}
    return publish("cluster", figures, units, out_dir=out_dir, started_at=started, params=params)
