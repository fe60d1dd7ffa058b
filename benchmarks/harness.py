"""One run of the harness: for each system in turn, start its server, run the chosen scenarios
against it, stop it (by PID, always), then write one result per system and scenario, REPORT.md
and the plots. Systems run one after another, each with the machine to itself.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

import uvloop

from benchmarks import report
from benchmarks.plan import Plan
from benchmarks.progress import Progress
from benchmarks.results import make_document, write_document
from benchmarks.scenarios import RUNNERS, SCENARIOS, Outcome, steps
from benchmarks.servers import Endpoint, LogBrokerServer, NatsServer, Server
from benchmarks.stats import summarize_samples, unit_of
from benchmarks.worker import Worker

SYSTEMS: Final = ("logbroker", "nats", "rabbitmq")
NEEDS_WORKER: Final = frozenset({"latency", "idle"})
COMMON_SETTINGS: Final = ("client", "durability", "partitions")
# Which of a driver's settings each scenario uses (beside the common ones).
SCENARIO_SETTINGS: Final = {"produce": ("produce",), "consume": ("produce", "consume"), "latency": ("tail",),
                            "idle": ("idle", "produce"), "queue": ("queue",)}


def make_server(system: str, work_dir: str | None) -> Server:
    if system == "logbroker":
        return LogBrokerServer(work_dir)
    if system == "nats":
        return NatsServer(work_dir)
    if system == "rabbitmq":
        from benchmarks.rabbitmq_server import RabbitMQServer

        return RabbitMQServer(work_dir)
    raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")


async def _run_system(endpoint: Endpoint, scenarios: Sequence[str], plan: Plan, worker: Worker | None,
                      progress: Progress) -> tuple[dict[str, Outcome], dict[str, Any]]:
    from benchmarks.drivers import driver_for

    outcomes = {}
    async with driver_for(endpoint) as driver:
        settings = driver.settings()
        for scenario in scenarios:
            outcomes[scenario] = await RUNNERS[scenario](
                driver, plan, f"b-{scenario}", lambda text: progress.advance(f"{endpoint.system}: {text}"),
                worker=worker)
    return outcomes, settings


def document_for(scenario: str, system: str, version: str, started_at: datetime.datetime, run_id: str,
                 quick: bool, outcome: Outcome, settings: dict[str, Any]) -> dict[str, Any]:
    figures = summarize_samples(outcome.samples)
    units = {name: unit_of(name) for name in figures}
    used = {k: v for k, v in settings.items() if k in COMMON_SETTINGS or k in SCENARIO_SETTINGS[scenario]}
    params: dict[str, Any] = {"run_id": run_id, "quick": quick, **used, **outcome.params}
    if outcome.status:
        params["status"] = outcome.status
    return make_document(scenario, system=system, version=version, started_at=started_at, params=params,
                         figures=figures, units=units)


def run(scenarios: Sequence[str], systems: Sequence[str], plan: Plan, *, quick: bool, out_dir: str,
        work_dir: str | None = None, command: str = "make bench") -> list[dict[str, Any]]:
    for scenario in scenarios:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}")
    started = datetime.datetime.now(datetime.UTC)
    run_id = started.strftime("%Y%m%dT%H%M%SZ")
    documents = []
    total = len(systems) * (1 + sum(steps(s, plan) for s in scenarios))
    with Progress(total) as progress:
        for system in systems:
            server = make_server(system, work_dir)
            progress.advance(f"{system}: starting the server")
            system_started = datetime.datetime.now(datetime.UTC)
            try:
                endpoint = server.start()
                worker = Worker(endpoint) if NEEDS_WORKER & set(scenarios) else None
                try:
                    if worker is not None:
                        worker.__enter__()
                    outcomes, settings = uvloop.run(_run_system(endpoint, scenarios, plan, worker, progress))
                finally:
                    if worker is not None:
                        worker.close()
            finally:
                server.stop()
            for scenario, outcome in outcomes.items():
                documents.append(document_for(scenario, system, server.version, system_started, run_id, quick,
                                              outcome, settings))
        progress.finish()
    write_run(documents, out_dir, rates=plan.latency_rates, command=command)
    return documents


def write_run(documents: Sequence[dict[str, Any]], out_dir: str, *, rates: Sequence[int],
              command: str = "make bench") -> str:
    """Write every document, the plots and REPORT.md into ``out_dir``; returns the report's path."""
    os.makedirs(out_dir, exist_ok=True)
    for document in documents:
        write_document(out_dir, document, per_system=True)
    from benchmarks.plots import write_plots

    plots = write_plots(documents, out_dir, rates)
    path = os.path.join(out_dir, "REPORT.md")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(report.render(documents, plots=plots, command=command))
    os.replace(path + ".tmp", path)
    print(f"wrote {len(documents)} result files, {len(plots)} plots and {path}", file=sys.stderr)
    return path
