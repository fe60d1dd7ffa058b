"""Result files (DESIGN §9): one JSON per scenario and system, medians with min and max."""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

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


def write_result(out_dir: str, scenario: str, *, system: str, version: str, started_at: datetime.datetime,
                 params: Mapping[str, Any], figures: Mapping[str, float], units: Mapping[str, str]) -> str:
    """Write ``<out_dir>/<scenario>.json`` atomically and return its path."""
    os.makedirs(out_dir, exist_ok=True)
    document = {
        "scenario": scenario,
        "system": system,
        "version": version,
        "started_at": started_at.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "params": dict(params),
        "figures": {k: round(v, 4) for k, v in figures.items()},
        "unit": dict(units),
    }
    path = os.path.join(out_dir, f"{scenario}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path
