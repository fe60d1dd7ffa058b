"""Server memory per idle consumer, measured on a fresh server in every repetition.

A server that has already served other work (a produce run's buffers, freed heap it keeps for
reuse) absorbs new connections into memory it already holds, so an RSS delta taken there says
little. Here each repetition and system starts its own server, creates the quiet log, starts the
client process (a ``Worker``: the connections are never opened by the measured process), waits
until the server's resident set settles and reads it, has the worker open ``consumers`` idle
consumers (each waiting on the empty log the way that system's consumers wait,
``Driver.hold_idle``), holds them through a wait-and-repoll cycle, waits until the resident set
settles again and reads it. The figure is the growth divided by the consumers (any one-time cost
of the first consumer is spread over all of them, which with thousands is small). Servers are
stopped by PID, always.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Final

import uvloop

from benchmarks.plan import Plan
from benchmarks.procstat import raise_open_files_limit, rss_mb
from benchmarks.progress import Progress
from benchmarks.scenarios import WORKER_READY_TIMEOUT_S, Outcome
from benchmarks.servers import Endpoint, Server
from benchmarks.worker import Worker

SAMPLE_INTERVAL_S: Final = 0.25      # how often the server's RSS is read while it settles
SETTLE_TOLERANCE: Final = 0.005      # settled: the window's readings lie within this share of RSS ...
SETTLE_FLOOR_MB: Final = 0.25        # ... or within this many MB, whichever is larger
SETTLE_TIMEOUT_S: Final = 60.0       # the longest wait for a settled reading
QUIET_LOG: Final = "b-idle-memory"

# The process whose resident set is read, per system (Endpoint.server_pid).
MEASURED_PROCESS: Final = {
    "logbroker": "the node process (python -m logbroker serve)",
    "logbroker-kafka": "the node process (python -m logbroker serve)",
    "nats": "the nats-server process",
    "rabbitmq": "the Erlang VM (beam.smp) of the node, from its pid file",
}


@dataclasses.dataclass(frozen=True)
class Reading:
    """A settled (or, after ``SETTLE_TIMEOUT_S``, the latest) resident set size."""

    mb: float
    settled: bool
    waited_s: float


def settled_rss_mb(pid: int, window_s: float, *, timeout_s: float = SETTLE_TIMEOUT_S,
                   sample: Callable[[int], float] = rss_mb, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> Reading:
    """Read ``pid``'s RSS every ``SAMPLE_INTERVAL_S`` until the readings of the last ``window_s``
    lie within the tolerance; their median. After ``timeout_s`` the last window's median, marked
    as not settled."""
    count = max(2, round(window_s / SAMPLE_INTERVAL_S) + 1)
    readings: list[float] = []
    started = clock()
    while True:
        readings = [*readings[-(count - 1):], sample(pid)]
        waited = clock() - started
        if len(readings) == count:
            spread = max(readings) - min(readings)
            if spread <= max(SETTLE_FLOOR_MB, SETTLE_TOLERANCE * max(readings)):
                return Reading(statistics.median(readings), True, waited)
        if waited >= timeout_s:
            return Reading(statistics.median(readings), False, waited)
        sleep(SAMPLE_INTERVAL_S)


def describe(plan: Plan) -> str:
    n = plan.idle_memory_consumers
    return (f"a fresh server per repetition and system; its RSS (/proc/<pid>/statm) read once settled (readings "
            f"over {plan.idle_memory_window_s:g} s within {SETTLE_TOLERANCE:.1%} or {SETTLE_FLOOR_MB:g} MB, at most "
            f"{SETTLE_TIMEOUT_S:g} s) after the quiet log is created and the client process has connected; then "
            f"that separate client process opens {n} idle consumers, holds them {plan.idle_memory_hold_s:g} s "
            f"once all are waiting, and the RSS is read again once settled; per consumer = growth / {n} "
            f"(KB = 1000 bytes)")


async def _create_log(endpoint: Endpoint, log: str) -> None:
    from benchmarks.drivers import driver_for

    async with driver_for(endpoint) as driver:
        await driver.create_log(log)


def measure_once(server: Server, plan: Plan, out: Outcome, note: str) -> None:
    """One repetition on one fresh ``server`` (started and stopped here), adding to ``out``."""
    consumers, window_s = plan.idle_memory_consumers, plan.idle_memory_window_s
    try:
        endpoint = server.start()
        uvloop.run(_create_log(endpoint, QUIET_LOG))
        with Worker(endpoint) as worker:
            before = settled_rss_mb(endpoint.server_pid, window_s)
            worker.begin("idle", QUIET_LOG, consumers, timeout_s=WORKER_READY_TIMEOUT_S)
            try:
                time.sleep(plan.idle_memory_hold_s)
                after = settled_rss_mb(endpoint.server_pid, window_s)
            finally:
                worker.stop_idle()
            held = worker.result(WORKER_READY_TIMEOUT_S)
    finally:
        server.stop()
    if held != consumers:
        raise RuntimeError(f"{server.system}: {held} of {consumers} idle consumers were held")
    for name, reading in (("before", before), ("after", after)):
        if not reading.settled:
            out.incomplete.append(f"{note}: RSS {name} the consumers did not settle in {reading.waited_s:.0f} s "
                                  "(the median of the last readings is used)")
    growth = after.mb - before.mb
    out.add("idle_server_rss_fresh_mb", before.mb)
    out.add("idle_server_rss_growth_mb", growth)
    out.add("idle_server_rss_per_consumer_kb", growth * 1e3 / consumers)


def run(systems: Sequence[str], make_server: Callable[[str], Server], plan: Plan, progress: Progress,
        rotated: Callable[[Sequence[str], int], list[str]]) -> dict[str, Outcome]:
    """Every repetition on every system (in ``rotated`` order), each on a fresh server."""
    raise_open_files_limit(plan.idle_memory_consumers)
    outcomes = {s: Outcome(params={"idle_memory": describe(plan), "idle_memory_consumers": plan.idle_memory_consumers,
                                   "idle_memory_process": MEASURED_PROCESS.get(s, "the server process")})
                for s in systems}
    for rep in range(plan.reps):
        for system in rotated(systems, rep):
            progress.advance(f"{system}: idle memory, {plan.idle_memory_consumers} consumers, fresh server, "
                             f"repetition {rep + 1}")
            measure_once(make_server(system), plan, outcomes[system], f"repetition {rep + 1}")
    return outcomes
