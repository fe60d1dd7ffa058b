"""The cost of authentication: the same produce and consume against two nodes started side by side,
one with auth off and one with auth on (a bearer token on every request, verified through the
token cache, ACL and quota checks on the path), alternating which goes first in each repetition.

- produce of 100-byte records in batches of 1000 (the throughput configuration) and in batches
  of 10 (so per-request costs, where auth sits, dominate);
- consume: raw-batch fetch of the whole topic, checksums verified, records counted from headers.

Figures are records/s per mode plus ``*_ratio`` = auth on / auth off (target: >= 0.9), and
``auth_path_us_per_request``: the auth path's own cost per request, measured in-process.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import tempfile
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final

import uvloop

from benchmarks import single_node
from benchmarks.node_bench import PARTITIONS, RECORD_BYTES, consume
from benchmarks.pipelined import produce_pipelined
from benchmarks.plan import BATCH_FULL, BATCH_QUICK
from benchmarks.plan import BatchPlan as Plan
from benchmarks.results import summarize
from benchmarks.single_node import Samples, gather, publish, summarize_all
from logbroker.client import Client
from logbroker.config import NodeConfig
from logbroker.launcher import NodeProcess
from logbroker.node import Node
from segments.batch import ProducerRecord, encode_batch

ADMIN: Final = "bench-admin"
PASSWORD: Final = "bench-admin-password"
AUTH_ON: Final = ("--auth", "on", "--admin-user", ADMIN, "--admin-password", PASSWORD)
IN_FLIGHT: Final = 4
AUTH_PATH_CALLS: Final = 50_000


QUICK, FULL = BATCH_QUICK, BATCH_FULL


async def produce(client: Client, topic: str, total: int, batch_records: int) -> float:
    """Seconds to produce ``total`` records in prebuilt batches, ``IN_FLIGHT`` requests at a time."""
    batch = encode_batch([ProducerRecord(os.urandom(RECORD_BYTES)) for _ in range(batch_records)])
    return await produce_pipelined(client, topic, total // batch_records, lambda _n: batch, partitions=PARTITIONS,
                                   in_flight=IN_FLIGHT)


async def one_rep(client: Client, rep: int, plan: Plan) -> dict[str, float]:
    topic = f"auth-bench-{rep}"
    await client.create_topic(topic, partitions=PARTITIONS, config={"flush": "interval"})
    big_s = await produce(client, topic, plan.big_batch_records, 1000)
    small_s = await produce(client, topic, plan.small_batch_records, 10)
    consume_s, consumed = await consume(client, topic, decode=False)
    assert consumed == plan.big_batch_records + plan.small_batch_records, consumed
    await client.delete_topic(topic)
    return {"produce_batch1000_records_per_s": plan.big_batch_records / big_s,
            "produce_batch10_records_per_s": plan.small_batch_records / small_s,
            "consume_raw_records_per_s": consumed / consume_s}


async def auth_path_us(calls: int) -> float:
    """Microseconds per request of the whole auth path (token check through the cache, user
    lookup, limits, connection count, ACL check, quota check) for a user with a grant, measured
    in-process on a real node, so the figure does not depend on the machine's HTTP noise."""

    class Connection:
        transport = None

    with tempfile.TemporaryDirectory() as data_dir:
        node = Node(NodeConfig(data_dir=data_dir, auth="on", admin_password=PASSWORD, rpc_port=0))
        await node.start()
        try:
            auth = node.auth
            await node.topics.create_topic({"name": "t"}, owner=ADMIN)
            await auth.create_user({"username": "user", "password": PASSWORD})
            await node.coordinator.set_acl("t", "user", frozenset({"write"}))
            header = "Bearer " + (await auth.login({"username": "user", "password": PASSWORD}))["access_token"]
            started = time.perf_counter()
            for _ in range(calls):
                principal, limits = await auth.authenticate(header)
                auth.admit_connection(principal, Connection, limits)
                await auth.authorize_topic(principal, "t", "write")
                auth.check_quota(principal, "produce", limits)
            return (time.perf_counter() - started) / calls * 1e6
        finally:
            await node.stop()


def _measure(url: str, credentials: dict[str, Any]) -> Callable[[int, Plan], Coroutine[Any, Any, dict[str, float]]]:
    async def run(rep: int, plan: Plan) -> dict[str, float]:
        async with Client(url, **credentials) as client:
            return await one_rep(client, rep, plan)

    return run


def run(*, quick: bool, out_dir: str | None, work_dir: str | None) -> dict[str, float]:
    plan = QUICK if quick else FULL
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    with single_node.work_dir("authbench-", work_dir) as work, \
            NodeProcess(os.path.join(work, "off"), "--log-level", "warning") as off, \
            NodeProcess(os.path.join(work, "on"), "--log-level", "warning", *AUTH_ON) as on:
        modes = {"off": _measure(off.url, {}), "on": _measure(on.url, {"username": ADMIN, "password": PASSWORD})}
        for rep in range(plan.reps):
            order = ("off", "on") if rep % 2 == 0 else ("on", "off")
            print(f"[auth] repetition {rep + 1}/{plan.reps} ({' then '.join(order)})", flush=True)
            for mode in order:
                gather(samples, {f"auth_{mode}_{name}": value
                                 for name, value in uvloop.run(modes[mode](rep, plan)).items()})
            gather(samples, {"auth_path_us_per_request": uvloop.run(auth_path_us(AUTH_PATH_CALLS))})
    figures, units = summarize_all(samples, lambda name: "us" if name.endswith("_us_per_request") else "records/s")
    for name in list(samples):
        if name.startswith("auth_on_"):
            base = name.removeprefix("auth_on_")
            ratios = [a / b for a, b in zip(samples[name], samples[f"auth_off_{base}"], strict=True)]
            summarize(f"{base}_ratio", ratios, "on/off", figures, units)
    params = {"quick": quick, **dataclasses.asdict(plan), "partitions": PARTITIONS, "record_bytes": RECORD_BYTES,
              "in_flight": IN_FLIGHT, "acks": "1", "flush": "interval"}
    return publish("auth", figures, units, out_dir=out_dir, started_at=started, params=params)
