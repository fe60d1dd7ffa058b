"""The result document of DESIGN §9, checked before it is written and after it is read.

``{scenario, system, version, started_at, machine: {cpus, python}, params: {...},
figures: {name: value}, unit: {name: unit}}``. Every figure has a unit; a figure ``x`` that has
``x_min``/``x_max`` siblings satisfies ``x_min <= x <= x_max``. Anything else is a
``ResultSchemaError`` naming the field, so a broken file never reaches the report.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from typing import Any, Final

NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")
FIGURE: Final = re.compile(r"^[a-z0-9][a-z0-9_]{0,199}$")
TOP_LEVEL: Final = frozenset({"scenario", "system", "version", "started_at", "machine", "params", "figures", "unit"})


class ResultSchemaError(ValueError):
    """A result document that does not have the DESIGN §9 shape."""


def validate_result(document: Any) -> None:
    """Raise ``ResultSchemaError`` unless ``document`` is a well-formed result document."""
    if not isinstance(document, Mapping):
        raise ResultSchemaError(f"a result document is an object, got {type(document).__name__}")
    missing = TOP_LEVEL - set(document)
    extra = set(document) - TOP_LEVEL
    if missing or extra:
        raise ResultSchemaError(f"fields missing: {sorted(missing)}, unexpected: {sorted(extra)}")
    for field in ("scenario", "system"):
        if not isinstance(document[field], str) or not NAME.match(document[field]):
            raise ResultSchemaError(f"{field} must match {NAME.pattern}, got {document[field]!r}")
    if not isinstance(document["version"], str) or not document["version"]:
        raise ResultSchemaError(f"version must be a non-empty string, got {document['version']!r}")
    _check_started_at(document["started_at"])
    _check_machine(document["machine"])
    if not isinstance(document["params"], Mapping) or not all(isinstance(k, str) for k in document["params"]):
        raise ResultSchemaError("params must be an object with string keys")
    _check_figures(document["figures"], document["unit"])


def _check_started_at(value: Any) -> None:
    if not isinstance(value, str):
        raise ResultSchemaError(f"started_at must be an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError as exc:
        raise ResultSchemaError(f"started_at is not ISO 8601: {value!r}") from exc
    if parsed.tzinfo is None:
        raise ResultSchemaError(f"started_at must carry a time zone: {value!r}")


def _check_machine(machine: Any) -> None:
    if not isinstance(machine, Mapping) or set(machine) != {"cpus", "python"}:
        raise ResultSchemaError(f"machine must be {{cpus, python}}, got {machine!r}")
    cpus = machine["cpus"]
    if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1:
        raise ResultSchemaError(f"machine.cpus must be a positive integer, got {cpus!r}")
    if not isinstance(machine["python"], str) or not machine["python"]:
        raise ResultSchemaError(f"machine.python must be a version string, got {machine['python']!r}")


def _check_figures(figures: Any, units: Any) -> None:
    if not isinstance(figures, Mapping) or not isinstance(units, Mapping):
        raise ResultSchemaError("figures and unit must be objects")
    if set(figures) != set(units):
        raise ResultSchemaError(f"figures without a unit: {sorted(set(figures) - set(units))}, "
                                f"units without a figure: {sorted(set(units) - set(figures))}")
    for name, value in figures.items():
        if not isinstance(name, str) or not FIGURE.match(name):
            raise ResultSchemaError(f"figure name must match {FIGURE.pattern}, got {name!r}")
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise ResultSchemaError(f"figure {name} must be a finite number, got {value!r}")
        if not isinstance(units[name], str) or not units[name]:
            raise ResultSchemaError(f"unit of {name} must be a non-empty string, got {units[name]!r}")
    for name, value in figures.items():
        low, high = figures.get(f"{name}_min"), figures.get(f"{name}_max")
        if (low is None) != (high is None):
            raise ResultSchemaError(f"figure {name} has only one of {name}_min and {name}_max")
        if low is not None and high is not None and not low <= value <= high:
            raise ResultSchemaError(f"figure {name} = {value} lies outside its min {low} and max {high}")
