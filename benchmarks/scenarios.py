"""The scenarios, written once for every system through ``drivers.base.Driver``.

Each returns its samples (figure name -> one value per repetition) and what it needs to say in
the result's params. Timed sections cover only the work the figure names (no set-up); server and
client CPU are sampled over the same sections.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any, Final

from benchmarks.drivers.base import Driver, stamped
from benchmarks.plan import SIZES, Plan
from benchmarks.procstat import CpuMeter, rss_mb
from benchmarks.stats import due_count, latency_figures
from benchmarks.worker import Worker

TICK_S: Final = 0.0005           # the paced sender wakes this often and sends what is due
LATENCY_GRACE_S: Final = 10.0    # how long the receiver may lag behind the sender's end
IDLE_READY_TIMEOUT_S: Final = 120.0
SCENARIOS: Final = ("produce", "consume", "latency", "idle", "queue")

Advance = Callable[[str], None]


@dataclasses.dataclass
class Outcome:
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    status: str | None = None      # e.g. "not available: ..." (then there are no samples)

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, []).append(value)


def steps(scenario: str, plan: Plan) -> int:
    """How many progress steps a scenario takes on one system."""
    per_rep = {"produce": 2 * len(SIZES), "consume": len(SIZES), "latency": len(SIZES) * len(plan.latency_rates),
               "idle": 1, "queue": len(SIZES)}[scenario]
    return per_rep * plan.reps + (len(SIZES) if scenario == "consume" else 0)


async def _timed_produce(driver: Driver, cpu: CpuMeter, log: str, size: int, count: int,
                         *, fsync: bool = False) -> tuple[float, float, float, int]:
    await driver.create_log(log, fsync=fsync)
    payload = os.urandom(size)
    cpu.start()
    acked = await driver.produce(log, payload, count, fsync=fsync)
    wall, server, client = cpu.stop()
    if acked != count:
        raise RuntimeError(f"{driver.system}: {acked} of {count} records acknowledged on {log}")
    return wall, server, client, acked


async def produce(driver: Driver, plan: Plan, run: str, advance: Advance, **_: Any) -> Outcome:
    out = Outcome(params={"records": dict(plan.records), "fsync_variant": driver.fsync_unsupported or "measured"})
    cpu = CpuMeter(driver.endpoint.server_pid)
    for rep in range(plan.reps):
        for size in SIZES:
            count = plan.count(plan.records, size)
            for fsync in (False, True):
                advance(f"produce {size} B{' fsync' if fsync else ''}, repetition {rep + 1}")
                if fsync and driver.fsync_unsupported:
                    continue
                kind = f"produce_fsync_{size}b" if fsync else f"produce_{size}b"
                wall, server, client, _ = await _timed_produce(driver, cpu, f"{run}-{kind}-r{rep}".replace("_", "-"),
                                                               size, count, fsync=fsync)
                out.add(f"{kind}_records_per_s", count / wall)
                out.add(f"{kind}_mb_per_s", count * size / wall / 1e6)
                out.add(f"{kind}_server_cpu_pct", server)
                out.add(f"{kind}_client_cpu_pct", client)
    return out


async def consume(driver: Driver, plan: Plan, run: str, advance: Advance, **_: Any) -> Outcome:
    """Fill one log per size, then read it from the start once per repetition (a new consumer each)."""
    out = Outcome(params={"records": dict(plan.records)})
    cpu = CpuMeter(driver.endpoint.server_pid)
    for size in SIZES:
        advance(f"consume {size} B: filling")
        count = plan.count(plan.records, size)
        log = f"{run}-consume-{size}b"
        await _timed_produce(driver, cpu, log, size, count)
        for rep in range(plan.reps):
            advance(f"consume {size} B, repetition {rep + 1}")
            cpu.start()
            got = await driver.consume(log, count)
            wall, server, client = cpu.stop()
            if got != count:
                raise RuntimeError(f"{driver.system}: read {got} of {count} records from {log}")
            out.add(f"consume_{size}b_records_per_s", count / wall)
            out.add(f"consume_{size}b_mb_per_s", count * size / wall / 1e6)
            out.add(f"consume_{size}b_server_cpu_pct", server)
            out.add(f"consume_{size}b_client_cpu_pct", client)
    return out


async def paced_send(driver: Driver, log: str, size: int, rate: int, total: int) -> float:
    """Send ``total`` stamped records at ``rate``/s (what is due, every ``TICK_S``); seconds taken."""
    pad = os.urandom(size - 8)
    started = time.perf_counter()
    sent = 0
    while sent < total:
        due = due_count(time.perf_counter() - started, rate, total)
        if due > sent:
            await driver.send_now(log, [stamped(pad) for _ in range(due - sent)])
            sent = due
        await asyncio.sleep(TICK_S)
    await driver.flush_sends()
    return time.perf_counter() - started


async def latency(driver: Driver, plan: Plan, run: str, advance: Advance, worker: Worker, **_: Any) -> Outcome:
    out = Outcome(params={"rates_per_s": list(plan.latency_rates), "seconds_per_point": plan.latency_seconds,
                          "tick_ms": TICK_S * 1000, "receiver": "a separate client process"})
    short: list[str] = []
    for rep in range(plan.reps):
        for rate in plan.latency_rates:
            for size in SIZES:
                advance(f"latency {rate}/s {size} B, repetition {rep + 1}")
                log = f"{run}-latency-{rate}-{size}b-r{rep}"
                await driver.create_log(log)
                total = max(1, int(rate * plan.latency_seconds))
                await asyncio.to_thread(worker.begin, "latencies", log, total,
                                        plan.latency_seconds + LATENCY_GRACE_S, timeout_s=60.0)
                elapsed = await paced_send(driver, log, size, rate, total)
                samples: list[float] = await asyncio.to_thread(worker.result, plan.latency_seconds
                                                               + 2 * LATENCY_GRACE_S)
                if len(samples) < total:
                    short.append(f"{rate}/s {size} B rep {rep + 1}: {len(samples)} of {total} received")
                if not samples:
                    raise RuntimeError(f"{driver.system}: no record received at {rate}/s, {size} B")
                for name, value in latency_figures(f"latency_{rate}_{size}b", samples).items():
                    out.add(name, value)
                out.add(f"latency_{rate}_{size}b_sent_records_per_s", total / elapsed)
    out.params["incomplete"] = short or "none: every record sent was received"
    return out


async def idle(driver: Driver, plan: Plan, run: str, advance: Advance, worker: Worker, **_: Any) -> Outcome:
    """Produce without and then with ``idle_consumers`` waiting on another (empty) log."""
    out = Outcome(params={"idle_consumers": plan.idle_consumers, "records": dict(plan.idle_records),
                          "idle_window_s": plan.idle_window_s})
    cpu = CpuMeter(driver.endpoint.server_pid)
    pid = driver.endpoint.server_pid
    for rep in range(plan.reps):
        advance(f"idle: {plan.idle_consumers} consumers, repetition {rep + 1}")
        baseline = {}
        for size in SIZES:
            count = plan.count(plan.idle_records, size)
            wall, *_rest = await _timed_produce(driver, cpu, f"{run}-idle-base-{size}b-r{rep}", size, count)
            baseline[size] = count / wall
        quiet_log = f"{run}-idle-quiet-r{rep}"
        await driver.create_log(quiet_log)
        rss_before = rss_mb(pid)
        started = time.perf_counter()
        await asyncio.to_thread(worker.begin, "idle", quiet_log, plan.idle_consumers, timeout_s=IDLE_READY_TIMEOUT_S)
        out.add("idle_connect_s", time.perf_counter() - started)
        try:
            cpu.start()
            await asyncio.sleep(plan.idle_window_s)
            _wall, server_idle, _client = cpu.stop()
            out.add("idle_server_cpu_pct", server_idle)
            out.add("idle_server_rss_delta_mb", rss_mb(pid) - rss_before)
            for size in SIZES:
                count = plan.count(plan.idle_records, size)
                wall, *_rest = await _timed_produce(driver, cpu, f"{run}-idle-busy-{size}b-r{rep}", size, count)
                out.add(f"idle_produce_{size}b_records_per_s", count / wall)
                out.add(f"baseline_produce_{size}b_records_per_s", baseline[size])
                out.add(f"idle_slowdown_{size}b_ratio", baseline[size] / (count / wall))
        finally:
            worker.stop_idle()
        held = await asyncio.to_thread(worker.result, IDLE_READY_TIMEOUT_S)
        if held != plan.idle_consumers:
            raise RuntimeError(f"{driver.system}: {held} of {plan.idle_consumers} idle consumers were held")
    return out


async def queue(driver: Driver, plan: Plan, run: str, advance: Advance, **_: Any) -> Outcome:
    reason = await driver.queue_unavailable()
    if reason is not None:
        advance("queue: not available")
        return Outcome(params={"records": dict(plan.queue_records)}, status=reason)
    out = Outcome(params={"records": dict(plan.queue_records)})
    cpu = CpuMeter(driver.endpoint.server_pid)
    for rep in range(plan.reps):
        for size in SIZES:
            advance(f"queue {size} B, repetition {rep + 1}")
            count = plan.count(plan.queue_records, size)
            name = f"{run}-queue-{size}b-r{rep}"
            await driver.create_queue(name)
            cpu.start()
            sent = await driver.queue_send(name, os.urandom(size), count)
            send_wall, _s, _c = cpu.stop()
            cpu.start()
            acked = await driver.queue_receive_ack(name, count)
            wall, server, client = cpu.stop()
            if sent != count or acked != count:
                raise RuntimeError(f"{driver.system}: queue {name}: {sent} sent, {acked} acked of {count}")
            out.add(f"queue_send_{size}b_records_per_s", count / send_wall)
            out.add(f"queue_receive_ack_{size}b_records_per_s", count / wall)
            out.add(f"queue_receive_ack_{size}b_server_cpu_pct", server)
            out.add(f"queue_receive_ack_{size}b_client_cpu_pct", client)
    return out


RUNNERS: Final = {"produce": produce, "consume": consume, "latency": latency, "idle": idle, "queue": queue}
