"""Result files (DESIGN §9): one JSON per scenario and system, medians with min and max.

A single-system benchmark writes ``<scenario>.json``; a run of several systems writes
``<scenario>.<system>.json`` per system. Every document is checked against
``benchmarks.schema`` before it is written, and again when it is read back.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.schema import validate_result

DEFAULT_OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def summarize(name: str, samples: Sequence[float], unit: str, figures: dict[str, float],
              units: dict[str, str]) -> None:
    """Add ``name`` (the median) and ``name_min``/``name_max`` to ``figures``."""
    assert samples, f"no samples for {name}"
    figures[name] = statistics.median(samples)
    figures[f"{name}_min"] = min(samples)
    figures[f"{name}_max"] = max(samples)
    for key in (name, f"{name}_min", f"{name}_max"):
        units[key] = unit


def make_document(scenario: str, *, system: str, version: str, started_at: datetime.datetime,
                  params: Mapping[str, Any], figures: Mapping[str, float],
                  units: Mapping[str, str]) -> dict[str, Any]:
    """A checked result document (figures rounded to 4 decimals, which keeps min <= median <= max)."""
    document = {
        "scenario": scenario,
        "system": system,
        "version": version,
        "started_at": started_at.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count() or 1, "python": platform.python_version()},
        "params": dict(params),
        "figures": {k: round(float(v), 4) for k, v in figures.items()},
        "unit": dict(units),
    }
    validate_result(document)
    return document


def write_document(out_dir: str, document: Mapping[str, Any], *, per_system: bool) -> str:
    """Write ``document`` atomically as ``<scenario>.json`` or ``<scenario>.<system>.json``, its
    figures in the order they were measured (the report, built from the files, keeps that order)."""
    validate_result(document)
    os.makedirs(out_dir, exist_ok=True)
    stem = f"{document['scenario']}.{document['system']}" if per_system else str(document["scenario"])
    path = os.path.join(out_dir, f"{stem}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    return path


def write_result(out_dir: str, scenario: str, *, system: str, version: str, started_at: datetime.datetime,
                 params: Mapping[str, Any], figures: Mapping[str, float], units: Mapping[str, str]) -> str:
    """Write ``<out_dir>/<scenario>.json`` atomically and return its path."""
    document = make_document(scenario, system=system, version=version, started_at=started_at, params=params,
                             figures=figures, units=units)
    return write_document(out_dir, document, per_system=False)


def _read_all(out_dir: str) -> list[dict[str, Any]]:
    """Every per-system document (``<scenario>.<system>.json``) in ``out_dir``, each checked."""
    documents = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.*.json"))):
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        validate_result(document)
        documents.append(document)
    return documents


def read_run(out_dir: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """The per-system documents of one run: ``run_id``, or the latest run found in ``out_dir``.
    Each is checked; a malformed file raises."""
    documents = _read_all(out_dir)
    runs = {str(d["params"].get("run_id")) for d in documents if d["params"].get("run_id")}
    if not runs:
        return []
    chosen = run_id if run_id is not None else max(runs)
    return [d for d in documents if d["params"].get("run_id") == chosen]


def read_latest(out_dir: str) -> list[dict[str, Any]]:
    """Per scenario, the documents of the latest run that measured it: a run of one scenario
    replaces that scenario's figures and leaves the others' (ratios stay within one run, since
    every document of a scenario comes from the same run)."""
    documents = [d for d in _read_all(out_dir) if d["params"].get("run_id")]
    latest: dict[str, str] = {}
    for d in documents:
        latest[d["scenario"]] = max(latest.get(d["scenario"], ""), str(d["params"]["run_id"]))
    return [d for d in documents if d["params"]["run_id"] == latest[d["scenario"]]]


def print_table(figures: dict[str, float], units: dict[str, str]) -> None:
    """Print each figure's median, min and max with its unit."""
    names = [n for n in figures if not n.endswith(("_min", "_max"))]
    width = max(len(n) for n in names)
    print(f"{'figure':<{width}}  {'median':>14}  {'min':>14}  {'max':>14}  unit")
    for name in names:
        print(f"{name:<{width}}  {figures[name]:>14,.2f}  {figures[name + '_min']:>14,.2f}  "
              f"{figures[name + '_max']:>14,.2f}  {units[name]}")
