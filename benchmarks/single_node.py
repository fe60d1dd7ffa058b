"""The frame the LogBroker-only benchmarks share (``log``, ``node``, ``auth``, ``groups``, ``queue``): a
temporary work dir removed afterwards, samples gathered per figure name over the repetitions, and
the summary (median, min, max) written as one result file and printed as a table."""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from benchmarks.results import DEFAULT_OUT_DIR, print_table, summarize, write_result

Samples = dict[str, list[float]]


@contextlib.contextmanager
def work_dir(prefix: str, parent: str | None) -> Iterator[str]:
    """A fresh directory under ``parent`` (default: the current one), removed on the way out."""
    path = tempfile.mkdtemp(prefix=prefix, dir=parent or os.getcwd())
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def gather(samples: Samples, figures: Mapping[str, float]) -> None:
    """Append one repetition's figures to the samples of each name."""
    for name, value in figures.items():
        samples.setdefault(name, []).append(value)


def summarize_all(samples: Samples, unit_of: Callable[[str], str]) -> tuple[dict[str, float], dict[str, str]]:
    figures: dict[str, float] = {}
    units: dict[str, str] = {}
    for name, values in samples.items():
        summarize(name, values, unit_of(name), figures, units)
    return figures, units


def publish(scenario: str, figures: dict[str, float], units: dict[str, str], *, out_dir: str | None,
            started_at: datetime.datetime, params: Mapping[str, Any], version: str = "0.1.0") -> dict[str, float]:
    """Write ``<scenario>.json`` and print the table; returns ``figures``."""
    path = write_result(out_dir or DEFAULT_OUT_DIR, scenario, system="logbroker", version=version,
                        started_at=started_at, params=params, figures=figures, units=units)
    print_table(figures, units)
    print(f"[{scenario}] wrote {path}")
    return figures
