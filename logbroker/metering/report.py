"""Every node's hourly usage records merged into the rows ``GET /v1/usage`` answers (pure).

A node writes, per hour, its own totals of each (user, topic); the cluster's usage of an hour is
the sum over nodes (storage too: each node counts the replicas it holds, so storage counts every
replica). By day, flows add up over the day's hours and storage is the day's largest hourly level
(the peak held). Rows come sorted by start, user and topic.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

from logbroker.metering.ledger import DAY_MS, FIELDS, HOUR_MS

Period = Literal["hour", "day"]
COLUMNS: Final = ("user", "topic", "start_ms", "bytes_in", "records_in", "bytes_out", "records_out", "requests",
                  "stream_seconds", "storage_bytes")
ROWS_MAX: Final = 100_000  # rows one answer holds; a wider query is refused (narrow the range or the user)
STORAGE: Final = FIELDS.index("storage_bytes")
FORMULA_STARTS: Final = frozenset("=+-@")


class TooManyRowsError(ValueError):
    pass


def merge(records: Iterable[tuple[int, int, Sequence[Sequence[Any]]]], *, from_ms: int, to_ms: int, by: Period,
          user: str | None = None) -> list[dict[str, Any]]:
    """``records`` are (hour start, node, rows ``[user, topic, *FIELDS]``), one per node and hour;
    the merged rows of periods starting in [``from_ms`` rounded down to its period, ``to_ms``)."""
    period = HOUR_MS if by == "hour" else DAY_MS
    start = from_ms - from_ms % period
    hourly: dict[tuple[int, str, str], list[int]] = {}
    for hour, _node, rows in records:
        if not start <= hour < to_ms:
            continue
        for row in rows:
            if user is not None and row[0] != user:
                continue
            key = (hour, str(row[0]), str(row[1]))
            sums = hourly.get(key)
            if sums is None:
                sums = hourly[key] = [0] * len(FIELDS)
            for i, value in enumerate(row[2:2 + len(FIELDS)]):
                sums[i] += int(value)
    merged: dict[tuple[int, str, str], list[int]] = {}
    for (hour, who, topic), sums in hourly.items():
        key = (hour - hour % period, who, topic)
        into = merged.get(key)
        if into is None:
            if len(merged) >= ROWS_MAX:
                raise TooManyRowsError(f"more than {ROWS_MAX} rows: narrow the range, ask by day, or name a user")
            merged[key] = list(sums)
            continue
        for i, value in enumerate(sums):
            into[i] = max(into[i], value) if i == STORAGE else into[i] + value
    return [_row(key, sums) for key, sums in sorted(merged.items())]


def _row(key: tuple[int, str, str], sums: list[int]) -> dict[str, Any]:
    start_ms, who, topic = key
    out: dict[str, Any] = {"user": who, "topic": topic, "start_ms": start_ms}
    for name, value in zip(FIELDS, sums, strict=True):
        if name == "stream_ms":
            out["stream_seconds"] = round(value / 1000, 3)
        else:
            out[name] = value
    return out


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with a header line; a name a spreadsheet would take for a formula gets a leading ``'``."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({**row, "user": _cell(row["user"]), "topic": _cell(row["topic"])} for row in rows)
    return out.getvalue()


def _cell(text: str) -> str:
    return "'" + text if text[:1] in FORMULA_STARTS else text
