"""The scenarios, written once for every system through ``drivers.base.Driver``.

A scenario is a list of points per repetition (a record size, a rate and size, ...) and a
function that measures one point on one system. The harness interleaves the systems point by
point, so that noise from elsewhere on the machine falls on every system alike. Timed sections
cover only the work the figure names (no set-up); server and client CPU are sampled over the
same sections.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from benchmarks.collector import collector_paused
from benchmarks.drivers.base import Driver, stamped
from benchmarks.plan import SIZES, Plan
from benchmarks.procstat import CpuMeter
from benchmarks.stats import due_count, latency_figures
from benchmarks.ticker import Ticker
from benchmarks.worker import Worker

TICK_S: Final = 0.0005           # the paced sender wakes this often and sends what is due
LATENCY_GRACE_S: Final = 10.0    # how long the receiver may lag behind the sender's end
WORKER_READY_TIMEOUT_S: Final = 120.0
SCENARIOS: Final = ("produce", "consume", "latency", "idle", "queue")


@dataclasses.dataclass
class Outcome:
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    status: str | None = None      # e.g. "not available: ..." (then there are no samples)
    incomplete: list[str] = dataclasses.field(default_factory=list)

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, []).append(value)

    def merge(self, other: Outcome) -> None:
        """Take in what another part of the same scenario measured (its own figure names)."""
        for name, values in other.samples.items():
            self.samples.setdefault(name, []).extend(values)
        self.params.update(other.params)
        self.incomplete.extend(other.incomplete)


@dataclasses.dataclass
class Context:
    """One system's side of one scenario."""

    driver: Driver
    plan: Plan
    worker: Worker | None
    out: Outcome = dataclasses.field(default_factory=Outcome)
    state: dict[Any, Any] = dataclasses.field(default_factory=dict)

    @property
    def cpu(self) -> CpuMeter:
        return CpuMeter(self.driver.endpoint.server_pid)

    def name(self, *parts: object) -> str:
        """A log or queue name every system accepts."""
        return "-".join(str(p) for p in ("b", *parts))


def points(scenario: str, plan: Plan) -> list[tuple[Any, ...]]:
    """The points measured in each repetition of ``scenario``."""
    if scenario == "produce":
        return [(size, fsync) for size in SIZES for fsync in (False, True)]
    if scenario in ("consume", "queue"):
        return [(size,) for size in SIZES]
    if scenario == "latency":
        return [(rate, size) for rate in plan.latency_rates for size in SIZES] + [("publish", size) for size in SIZES]
    if scenario == "idle":
        return [(plan.idle_consumers,)]
    raise ValueError(f"unknown scenario {scenario!r}")


def label(scenario: str, point: tuple[Any, ...]) -> str:
    if scenario == "produce":
        return f"produce {point[0]} B{' fsync' if point[1] else ''}"
    if scenario == "latency" and point[0] == "publish":
        return f"latency: one publish at a time, {point[1]} B"
    if scenario == "latency":
        return f"latency {point[0]}/s {point[1]} B"
    if scenario == "idle":
        return f"idle: {point[0]} consumers"
    return f"{scenario} {point[0]} B"


async def _timed_produce(ctx: Context, log: str, size: int, count: int,
                         *, fsync: bool = False) -> tuple[float, float, float]:
    await ctx.driver.create_log(log, fsync=fsync)
    payload = os.urandom(size)
    cpu = ctx.cpu
    cpu.start()
    acked = await ctx.driver.produce(log, payload, count, fsync=fsync)
    wall, server, client = cpu.stop()
    await ctx.driver.settle()
    if acked != count:
        raise RuntimeError(f"{ctx.driver.system}: {acked} of {count} records acknowledged on {log}")
    return wall, server, client


async def prepare(scenario: str, ctx: Context) -> None:
    """Per-system set-up before the first repetition (or a status saying the system has no such thing)."""
    plan = ctx.plan
    if scenario == "produce":
        ctx.out.params.update(records=dict(plan.records), fsync_variant=ctx.driver.fsync_unsupported or "measured")
    elif scenario == "consume":
        ctx.out.params.update(records=dict(plan.records), note="one full log per size, read from the start "
                              "once per repetition by a new consumer")
        for size in SIZES:
            await _timed_produce(ctx, ctx.name("consume", f"{size}b"), size, plan.count(plan.records, size))
    elif scenario == "latency":
        ctx.out.params.update(rates_per_s=list(plan.latency_rates), seconds_per_point=plan.latency_seconds,
                              tick_ms=TICK_S * 1000, receiver="a separate client process, subscribed before "
                              "the first record is sent")
    elif scenario == "idle":
        ctx.out.params.update(idle_consumers=plan.idle_consumers, records=dict(plan.idle_records),
                              idle_window_s=plan.idle_window_s)
    elif scenario == "queue":
        ctx.out.params.update(records=dict(plan.queue_records))
        ctx.out.status = await ctx.driver.queue_unavailable()


async def measure(scenario: str, ctx: Context, point: tuple[Any, ...], rep: int) -> None:
    """Measure one point of one repetition on one system, adding to ``ctx.out``."""
    run: Callable[[Context, tuple[Any, ...], int], Awaitable[None]] = _MEASURES[scenario]
    await run(ctx, point, rep)


async def _produce(ctx: Context, point: tuple[Any, ...], rep: int) -> None:
    size, fsync = point
    if fsync and ctx.driver.fsync_unsupported:
        return
    kind = f"produce_fsync_{size}b" if fsync else f"produce_{size}b"
    count = ctx.plan.count(ctx.plan.records, size)
    wall, server, client = await _timed_produce(ctx, ctx.name(kind.replace("_", "-"), f"r{rep}"), size, count,
                                                fsync=fsync)
    ctx.out.add(f"{kind}_records_per_s", count / wall)
    ctx.out.add(f"{kind}_mb_per_s", count * size / wall / 1e6)
    ctx.out.add(f"{kind}_server_cpu_pct", server)
    ctx.out.add(f"{kind}_client_cpu_pct", client)


async def _consume(ctx: Context, point: tuple[Any, ...], rep: int) -> None:
    (size,) = point
    count = ctx.plan.count(ctx.plan.records, size)
    log = ctx.name("consume", f"{size}b")
    cpu = ctx.cpu
    cpu.start()
    got = await ctx.driver.consume(log, count)
    wall, server, client = cpu.stop()
    await ctx.driver.settle()
    if got != count:
        raise RuntimeError(f"{ctx.driver.system}: read {got} of {count} records from {log}")
    ctx.out.add(f"consume_{size}b_records_per_s", count / wall)
    ctx.out.add(f"consume_{size}b_mb_per_s", count * size / wall / 1e6)
    ctx.out.add(f"consume_{size}b_server_cpu_pct", server)
    ctx.out.add(f"consume_{size}b_client_cpu_pct", client)


async def paced_send(driver: Driver, log: str, size: int, rate: int, total: int) -> float:
    """Send ``total`` stamped records at ``rate``/s (what is due, every ``TICK_S``); seconds taken."""
    pad = os.urandom(size - 8)
    started = time.perf_counter()
    sent = 0
    with Ticker(TICK_S) as ticker:
        while sent < total:
            due = due_count(time.perf_counter() - started, rate, total)
            if due > sent:
                await driver.send_now(log, [stamped(pad) for _ in range(due - sent)])
                sent = due
            await ticker.tick()
    await driver.flush_sends()
    return time.perf_counter() - started


async def _publish_round_trips(ctx: Context, size: int, rep: int) -> None:
    """One record published at a time, each acknowledged before the next: the round trip an
    application pays per event (``publish_{size}b_*_ms``)."""
    log = ctx.name("publish", f"{size}b", f"r{rep}")
    await ctx.driver.create_log(log)
    pad = os.urandom(size)
    took: list[float] = []
    with collector_paused():
        for _ in range(ctx.plan.publish_round_trips):
            started = time.perf_counter()
            await ctx.driver.publish_one(log, pad)
            took.append((time.perf_counter() - started) * 1000)
    for name, value in latency_figures(f"publish_{size}b", took).items():
        ctx.out.add(name, value)


async def _latency(ctx: Context, point: tuple[Any, ...], rep: int) -> None:
    if point[0] == "publish":
        await _publish_round_trips(ctx, point[1], rep)
        return
    rate, size = point
    assert ctx.worker is not None, "the latency scenario needs a worker process"
    seconds = ctx.plan.latency_seconds
    log = ctx.name("latency", rate, f"{size}b", f"r{rep}")
    await ctx.driver.create_log(log)
    total = max(1, int(rate * seconds))
    await ctx.driver.prepare_sends(log)
    await asyncio.to_thread(ctx.worker.begin, "latencies", log, total, seconds + LATENCY_GRACE_S,
                            timeout_s=WORKER_READY_TIMEOUT_S)
    cpu = ctx.cpu
    cpu.start()
    with collector_paused():
        elapsed = await paced_send(ctx.driver, log, size, rate, total)
    _wall, server, _client = cpu.stop()
    samples: list[float] = await asyncio.to_thread(ctx.worker.result, seconds + 2 * LATENCY_GRACE_S)
    if len(samples) < total:
        ctx.out.incomplete.append(f"{rate}/s {size} B rep {rep + 1}: {len(samples)} of {total} received")
    if not samples:
        raise RuntimeError(f"{ctx.driver.system}: no record received at {rate}/s, {size} B")
    for name, value in latency_figures(f"latency_{rate}_{size}b", samples).items():
        ctx.out.add(name, value)
    ctx.out.add(f"latency_{rate}_{size}b_sent_records_per_s", total / elapsed)
    ctx.out.add(f"latency_{rate}_{size}b_server_cpu_pct", server)


async def _idle(ctx: Context, point: tuple[Any, ...], rep: int) -> None:
    """Produce without and then with ``consumers`` waiting on another (empty) log. What the idle
    consumers cost in memory is measured apart, on fresh servers (``benchmarks.idle_memory``):
    this server has grown its heap for the produce runs before them."""
    (consumers,) = point
    assert ctx.worker is not None, "the idle scenario needs a worker process"
    plan = ctx.plan
    baseline = {}
    for size in SIZES:
        count = plan.count(plan.idle_records, size)
        wall, _server, _client = await _timed_produce(ctx, ctx.name("idle-base", f"{size}b", f"r{rep}"), size, count)
        baseline[size] = count / wall
    quiet_log = ctx.name("idle-quiet", f"r{rep}")
    await ctx.driver.create_log(quiet_log)
    started = time.perf_counter()
    await asyncio.to_thread(ctx.worker.begin, "idle", quiet_log, consumers, timeout_s=WORKER_READY_TIMEOUT_S)
    ctx.out.add("idle_connect_s", time.perf_counter() - started)
    try:
        cpu = ctx.cpu
        cpu.start()
        await asyncio.sleep(plan.idle_window_s)
        _wall, server_idle, _client = cpu.stop()
        ctx.out.add("idle_server_cpu_pct", server_idle)
        for size in SIZES:
            count = plan.count(plan.idle_records, size)
            wall, _server, _client = await _timed_produce(ctx, ctx.name("idle-busy", f"{size}b", f"r{rep}"),
                                                          size, count)
            ctx.out.add(f"baseline_produce_{size}b_records_per_s", baseline[size])
            ctx.out.add(f"idle_produce_{size}b_records_per_s", count / wall)
            ctx.out.add(f"idle_slowdown_{size}b_ratio", baseline[size] / (count / wall))
    finally:
        ctx.worker.stop_idle()
    held = await asyncio.to_thread(ctx.worker.result, WORKER_READY_TIMEOUT_S)
    if held != consumers:
        raise RuntimeError(f"{ctx.driver.system}: {held} of {consumers} idle consumers were held")


async def _queue(ctx: Context, point: tuple[Any, ...], rep: int) -> None:
    (size,) = point
    count = ctx.plan.count(ctx.plan.queue_records, size)
    name = ctx.name("queue", f"{size}b", f"r{rep}")
    await ctx.driver.create_queue(name)
    cpu = ctx.cpu
    cpu.start()
    sent = await ctx.driver.queue_send(name, os.urandom(size), count)
    send_wall, _server, _client = cpu.stop()
    await ctx.driver.settle()
    cpu.start()
    acked = await ctx.driver.queue_receive_ack(name, count)
    wall, server, client = cpu.stop()
    await ctx.driver.settle()
    if sent != count or acked != count:
        raise RuntimeError(f"{ctx.driver.system}: queue {name}: {sent} sent, {acked} acked of {count}")
    ctx.out.add(f"queue_send_{size}b_records_per_s", count / send_wall)
    ctx.out.add(f"queue_receive_ack_{size}b_records_per_s", count / wall)
    ctx.out.add(f"queue_receive_ack_{size}b_server_cpu_pct", server)
    ctx.out.add(f"queue_receive_ack_{size}b_client_cpu_pct", client)


_MEASURES: Final[dict[str, Callable[[Context, tuple[Any, ...], int], Awaitable[None]]]] = {
    "produce": _produce, "consume": _consume, "latency": _latency, "idle": _idle, "queue": _queue}


def steps(scenario: str, plan: Plan) -> int:
    """Progress steps of a scenario on one system (one per point and repetition, plus set-up)."""
    return 1 + plan.reps * len(points(scenario, plan))
