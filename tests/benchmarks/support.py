"""Result documents for the harness's unit tests (built the way the harness builds them)."""

from __future__ import annotations

import datetime
from typing import Any

from benchmarks.results import make_document
from benchmarks.stats import unit_of

STARTED = datetime.datetime(2026, 11, 23, 9, 0, tzinfo=datetime.UTC)


def document(scenario: str, system: str, samples: dict[str, list[float]], *, run_id: str = "20261123T090000Z",
             **params: Any) -> dict[str, Any]:
    figures: dict[str, float] = {}
    for name, values in samples.items():
        ordered = sorted(values)
        figures[name] = ordered[len(ordered) // 2]
        figures[f"{name}_min"], figures[f"{name}_max"] = ordered[0], ordered[-1]
    return make_document(scenario, system=system, version="1.0", started_at=STARTED,
                         params={"run_id": run_id, **params}, figures=figures,
                         units={n: unit_of(n) for n in figures})
