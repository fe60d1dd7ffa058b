"""Offset planning (pure): turn option specs and the partitions' current bounds into ranges.

Invariants: every planned range satisfies ``earliest <= start <= end <= high watermark`` at the
time it was planned (so a read never goes past the high watermark), ranges of one partition never
overlap, and a rate-limited end moves no partition backwards and no partition past its latest.
Streaming offsets are Kafka's JSON shape, ``{"<topic>": {"<partition>": <next offset>}}``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from spark_connector.errors import DataLossError, OptionError
from spark_connector.options import EARLIEST, LATEST, OffsetSpec


@dataclasses.dataclass(frozen=True, slots=True)
class Bounds:
    """What a partition holds now: ``[earliest, latest)``, latest being the high watermark."""

    earliest: int
    latest: int


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetRange:
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def resolve(spec: OffsetSpec, bounds: Mapping[int, Bounds], *, default: int, display: str) -> dict[int, int]:
    """Concrete offsets per partition for ``earliest``/``latest``/JSON; partitions the JSON leaves
    out take ``default`` (EARLIEST or LATEST)."""
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - set(bounds))
        if unknown:
            raise OptionError(f"{display} names partition(s) {unknown} that the topic does not have "
                              f"(it has {sorted(bounds)})")
        wanted = {p: spec.get(p, default) for p in bounds}
    else:
        wanted = dict.fromkeys(bounds, EARLIEST if spec == "earliest" else LATEST)
    return {p: _concrete(value, bounds[p]) for p, value in wanted.items()}


def _concrete(value: int, bounds: Bounds) -> int:
    if value == EARLIEST:
        return bounds.earliest
    if value == LATEST:
        return bounds.latest
    return value


def batch_ranges(starts: Mapping[int, int], ends: Mapping[int, int], bounds: Mapping[int, Bounds], *,
                 fail_on_data_loss: bool) -> list[OffsetRange]:
    """One range per partition, ends capped at the high watermark; starts below the earliest
    offset are data loss (an error, or moved up to the earliest when failOnDataLoss is false)."""
    ranges = []
    for p in sorted(bounds):
        start, end = starts[p], min(ends[p], bounds[p].latest)
        start = check_start(p, start, bounds[p].earliest, fail_on_data_loss=fail_on_data_loss)
        if start > end:
            raise OptionError(f"partition {p}: the starting offset {start} is after the ending offset {end} "
                              f"(the high watermark is {bounds[p].latest})")
        ranges.append(OffsetRange(p, start, end))
    return ranges


def check_start(partition: int, start: int, earliest: int, *, fail_on_data_loss: bool) -> int:
    """``start``, or ``earliest`` when records from ``start`` were deleted and loss is tolerated."""
    if start >= earliest:
        return start
    if fail_on_data_loss:
        raise DataLossError(
            f"partition {partition}: offsets {start}..{earliest - 1} were deleted (retention) before they were "
            f"read; the earliest offset is now {earliest}. Set failOnDataLoss=false to skip them with a warning")
    return earliest


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are at least ``min_partitions`` (by size, as Kafka's source does)."""
    nonempty = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in nonempty)
    if min_partitions is None or min_partitions <= len(nonempty) or total == 0:
        return nonempty
    out = []
    for r in nonempty:
        pieces = max(1, min(r.size, math.ceil(r.size * min_partitions / total)))
        step, extra = divmod(r.size, pieces)
        start = r.start
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.partition, start, end))
            start = end
        assert start == r.end
    return out


def rate_limit(start: Mapping[int, int], latest: Mapping[int, int], max_records: int | None) -> dict[int, int]:
    """End offsets that take at most ``max_records`` past ``start`` in total, shared across the
    partitions in proportion to what each has waiting (largest remainders get the leftover)."""
    available = {p: max(0, latest[p] - start.get(p, 0)) for p in latest}
    end = {p: max(start.get(p, 0), latest[p]) if available[p] == 0 else latest[p] for p in latest}
    total = sum(available.values())
    if max_records is None or total <= max_records:
        return end
    shares = {p: available[p] * max_records / total for p in available}
    taken = {p: int(shares[p]) for p in shares}
    leftover = max_records - sum(taken.values())
    for p in sorted(shares, key=lambda q: (taken[q] - shares[q], q))[:leftover]:
        taken[p] += 1
    return {p: start.get(p, 0) + min(taken[p], available[p]) if available[p] else end[p] for p in latest}


def to_json(topic: str, offsets: Mapping[int, int]) -> dict[str, Any]:
    return {topic: {str(p): int(offsets[p]) for p in sorted(offsets)}}


def from_json(topic: str, document: Mapping[str, Any]) -> dict[int, int]:
    """Parse a streaming offset written by ``to_json`` (read back from Spark's checkpoint)."""
    inner = document.get(topic)
    if not isinstance(inner, dict) or set(document) != {topic}:
        raise OptionError(f"the checkpointed offset {dict(document)} is not for topic {topic!r}; "
                          f"a checkpoint belongs to one query: use a new checkpointLocation for another topic")
    return {int(p): int(o) for p, o in inner.items()}
