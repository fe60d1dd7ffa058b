"""One run of the harness: start every system's server (and a worker process per system), run
the chosen scenarios with the systems interleaved point by point — the order rotating each
repetition — stop everything (by PID, always); with ``idle``, measure the idle consumers' memory
on a fresh server per repetition and system (``benchmarks.idle_memory``); then write one result
per system and scenario, REPORT.md and the plots.

Interleaving matters on a shared 2-core machine: a burst of load from elsewhere lands on one
point of every system rather than on a whole block of one system's runs. Servers that are not
being measured sit idle.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

import uvloop

from benchmarks import idle_memory, report
from benchmarks.plan import Plan
from benchmarks.profiling import Profiler
from benchmarks.progress import Progress
from benchmarks.results import make_document, read_latest, write_document
from benchmarks.scenarios import SCENARIOS, Context, Outcome, label, measure, points, prepare, steps
from benchmarks.servers import Endpoint, LogBrokerKafkaServer, LogBrokerServer, NatsServer, Server
from benchmarks.stats import summarize_samples, unit_of
from benchmarks.worker import Worker

# LogBroker over HTTP with its own client, LogBroker through its Kafka listener with librdkafka, the peers.
SYSTEMS: Final = ("logbroker", "logbroker-kafka", "nats", "rabbitmq")
NODES: Final = frozenset({"logbroker", "logbroker-kafka"})   # the systems whose server is a LogBroker node
ANALYSIS: Final = "ANALYSIS.md"      # hand-written findings kept next to the results, linked from REPORT.md
NEEDS_WORKER: Final = frozenset({"latency", "idle"})
COMMON_SETTINGS: Final = ("client", "durability", "partitions")
# Which of a driver's settings each scenario uses (beside the common ones).
SCENARIO_SETTINGS: Final = {"produce": ("produce",), "consume": ("produce", "consume"), "latency": ("tail",),
                            "idle": ("idle", "produce"), "queue": ("queue",)}


def make_server(system: str, work_dir: str | None) -> Server:
    if system == "logbroker":
        return LogBrokerServer(work_dir)
    if system == "logbroker-kafka":
        return LogBrokerKafkaServer(work_dir)
    if system == "nats":
        return NatsServer(work_dir)
    if system == "rabbitmq":
        from benchmarks.rabbitmq_server import RabbitMQServer

        return RabbitMQServer(work_dir)
    raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")


def rotated(systems: Sequence[str], rep: int) -> list[str]:
    """The order the systems go in repetition ``rep`` (each goes first once in turn)."""
    k = rep % len(systems)
    return [*systems[k:], *systems[:k]]


async def _run_all(endpoints: dict[str, Endpoint], workers: dict[str, Worker], scenarios: Sequence[str],
                   plan: Plan, progress: Progress) -> tuple[dict[str, dict[str, Outcome]], dict[str, dict[str, Any]]]:
    from benchmarks.drivers import driver_for

    systems = list(endpoints)
    outcomes: dict[str, dict[str, Outcome]] = {}
    async with contextlib.AsyncExitStack() as stack:
        drivers = {s: await stack.enter_async_context(driver_for(endpoints[s])) for s in systems}
        settings = {s: drivers[s].settings() for s in systems}
        for scenario in scenarios:
            contexts = {s: Context(drivers[s], plan, workers.get(s)) for s in systems}
            for system in systems:
                progress.advance(f"{system}: {scenario}: set-up")
                await prepare(scenario, contexts[system])
            for rep in range(plan.reps):
                for point in points(scenario, plan):
                    for system in rotated(systems, rep):
                        progress.advance(f"{system}: {label(scenario, point)}, repetition {rep + 1}")
                        if contexts[system].out.status is None:
                            await measure(scenario, contexts[system], point, rep)
            for system in systems:
                outcomes.setdefault(system, {})[scenario] = contexts[system].out
    return outcomes, settings


def document_for(scenario: str, system: str, version: str, started_at: datetime.datetime, run_id: str,
                 quick: bool, outcome: Outcome, settings: dict[str, Any], *, command: str = "make bench",
                 ) -> dict[str, Any]:
    figures = summarize_samples(outcome.samples)
    units = {name: unit_of(name) for name in figures}
    used = {k: v for k, v in settings.items() if k in COMMON_SETTINGS or k in SCENARIO_SETTINGS[scenario]}
    params: dict[str, Any] = {"run_id": run_id, "command": command, "quick": quick, **used, **outcome.params}
    if scenario == "latency":
        params["incomplete"] = outcome.incomplete or "none: every record sent was received"
    if scenario == "idle" and "idle_memory" in params:
        params["idle_memory_unsettled"] = outcome.incomplete or "none: every reading settled"
    if outcome.status:
        params["status"] = outcome.status
    return make_document(scenario, system=system, version=version, started_at=started_at, params=params,
                         figures=figures, units=units)


def run(scenarios: Sequence[str], systems: Sequence[str], plan: Plan, *, quick: bool, out_dir: str,
        work_dir: str | None = None, command: str = "make bench", profile_dir: str | None = None,
        ) -> list[dict[str, Any]]:
    for scenario in scenarios:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}")
    started = datetime.datetime.now(datetime.UTC)
    run_id = started.strftime("%Y%m%dT%H%M%SZ")
    servers: dict[str, Server] = {}
    workers: dict[str, Worker] = {}
    fresh_idle = "idle" in scenarios
    total = len(systems) * (1 + sum(steps(s, plan) for s in scenarios) + (plan.reps if fresh_idle else 0))
    with Progress(total) as progress:
        with contextlib.ExitStack() as stack:
            endpoints = {}
            for system in systems:
                progress.advance(f"{system}: starting the server")
                servers[system] = make_server(system, work_dir)
                stack.callback(servers[system].stop)
                endpoints[system] = servers[system].start()
                if NEEDS_WORKER & set(scenarios):
                    workers[system] = stack.enter_context(Worker(endpoints[system]))
            if profile_dir is not None:
                profiler = Profiler(profile_dir)
                stack.callback(lambda: progress.note(f"profiles: {', '.join(profiler.stop())}"))
                _profile(profiler, endpoints, workers)
            outcomes, settings = uvloop.run(_run_all(endpoints, workers, scenarios, plan, progress))
        if fresh_idle:       # after the shared servers are stopped: nothing else runs beside them
            memory = idle_memory.run(systems, lambda s: make_server(s, work_dir), plan, progress, rotated)
            for system, outcome in memory.items():
                outcomes[system]["idle"].merge(outcome)
        progress.finish()
    documents = [document_for(scenario, system, servers[system].version, started, run_id, quick, outcome,
                              settings[system], command=command)
                 for system in systems for scenario, outcome in outcomes[system].items()]
    write_run(documents, out_dir, rates=plan.latency_rates)
    return documents


def _profile(profiler: Profiler, endpoints: dict[str, Endpoint], workers: dict[str, Worker]) -> None:
    """py-spy on the LogBroker nodes (the only Python servers) and on every client process."""
    profiler.record("client", os.getpid())
    for system in sorted(NODES & set(endpoints)):
        profiler.record(f"{system}-node", endpoints[system].server_pid)
    for system, worker in workers.items():
        profiler.record(f"{system}-receiver", worker.pid)


def write_run(documents: Sequence[dict[str, Any]], out_dir: str, *, rates: Sequence[int]) -> str:
    """Write every document into ``out_dir``, then the plots and REPORT.md of what ``out_dir`` now
    holds: each scenario from its latest run (``results.read_latest``), so that a run of one
    scenario replaces only that scenario's figures. Returns the report's path."""
    os.makedirs(out_dir, exist_ok=True)
    for document in documents:
        write_document(out_dir, document, per_system=True)
    from benchmarks.plots import write_plots

    shown = read_latest(out_dir)
    rates = sorted({int(r) for d in shown for r in d["params"].get("rates_per_s", [])}) or list(rates)
    plots = write_plots(shown, out_dir, rates)
    notes = [f"Where the time goes (profiles) and what would close the gaps: [{ANALYSIS}]({ANALYSIS})."] \
        if os.path.exists(os.path.join(out_dir, ANALYSIS)) else []
    path = os.path.join(out_dir, "REPORT.md")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(report.render(shown, plots=plots, notes=notes))
    os.replace(path + ".tmp", path)
    print(f"wrote {len(documents)} result files, {len(plots)} plots and {path}", file=sys.stderr)
    return path
