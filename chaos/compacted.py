"""The checks of a chaos run's compacted topic, as pure functions over its keyed writes and the
copies read at the end. Compaction removes superseded records and, once old, tombstones, each
replica on its own schedule, so copies are compared by key, not by offset: below the final high
watermark, every copy's key -> latest value (a tombstone: the key is absent) must be the same.

What they read:

- ``kv_write`` events (``chaos.history``): ``invoke`` with ``key``, ``id`` (the write's identity,
  also carried by the record in its ``id`` header), ``value`` (the id, or None for a tombstone),
  ``partition``; ``ok`` with the same and ``offset`` (acknowledged, ``acks=all``); ``info``/``fail``
  with the same (the outcome is unknown: the record may be stored).
- a copy of a partition: its records in the order stored, ``KeyedRecord(offset, key, value, id)``
  (a list, so that an offset stored twice or out of order shows).
- ``log``: the copy read through the cluster at the end (the reference), ``{partition: records}``,
  with ``high_watermarks`` ``{partition: offset}``; ``replicas``: ``{node: {partition: records}}``
  read from each node's data directory.

Rules: (a) each replica's key state below the high watermark equals the log's (``key_conflicts``);
(b) no acknowledged update is lost (``lost_updates``): the log's record for a key is the latest
acknowledged write to it, at its acknowledged offset, or a write of unknown outcome stored after
it; the log may hold no record for the key only when that write is a tombstone or a tombstone of
unknown outcome was written to the key (tombstones are removed once ``delete_retention_ms`` old);
(c) every copy's offsets strictly increase (``offset_violations``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from chaos.history import Event

WRITE = "kv_write"


class KeyedRecord(NamedTuple):
    offset: int
    key: str
    value: str | None  # None: a tombstone
    id: str  # the write's identity from the record's ``id`` header ("" when it has none)


Copy = Mapping[int, Sequence[KeyedRecord]]


@dataclasses.dataclass(frozen=True)
class KeyedWrite:
    id: str
    key: str
    partition: int
    tombstone: bool
    offset: int | None  # where it was acknowledged; None when its outcome is unknown


@dataclasses.dataclass(frozen=True)
class KeyConflict:
    node: str
    partition: int
    key: str
    log: str | None  # the log's latest value (None: absent)
    replica: str | None


@dataclasses.dataclass(frozen=True)
class LostUpdate:
    key: str
    partition: int
    acked: str  # the latest acknowledged write's id
    acked_offset: int
    stored: str | None  # the id of the record the log holds for the key (None: none)
    stored_offset: int | None
    reason: str


def keyed_writes(events: Iterable[Event]) -> dict[str, KeyedWrite]:
    """Every keyed write by id: acknowledged (with its offset) or of unknown outcome. A write
    invoked and never answered (the run ended first) counts as unknown."""
    invoked: dict[str, Event] = {}
    acked: dict[str, int] = {}
    for e in events:
        if e["f"] != WRITE:
            continue
        if e["type"] == "invoke":
            invoked[e["id"]] = e
        elif e["type"] == "ok":
            invoked.setdefault(e["id"], e)
            acked[e["id"]] = int(e["offset"])
    return {i: KeyedWrite(i, str(e["key"]), int(e["partition"]), e["value"] is None, acked.get(i))
            for i, e in invoked.items()}


def latest_by_key(records: Iterable[KeyedRecord], end: int) -> dict[str, KeyedRecord]:
    """Each key's record with the highest offset below ``end`` (tombstones included)."""
    latest: dict[str, KeyedRecord] = {}
    for r in records:
        if r.offset < end and (r.key not in latest or r.offset > latest[r.key].offset):
            latest[r.key] = r
    return latest


def key_state(records: Iterable[KeyedRecord], end: int) -> dict[str, str]:
    """key -> latest value below ``end``; a key whose latest record is a tombstone is absent."""
    return {k: r.value for k, r in latest_by_key(records, end).items() if r.value is not None}


def key_conflicts(log: Copy, replicas: Mapping[str, Copy], high_watermarks: Mapping[int, int]) -> list[KeyConflict]:
    """Keys whose latest value below the high watermark differs between a replica and the log
    (a replica without a partition of the log holds none of its keys)."""
    found = []
    for node, copy in sorted(replicas.items()):
        for partition, end in sorted(high_watermarks.items()):
            agreed = key_state(log.get(partition, ()), end)
            held = key_state(copy.get(partition, ()), end)
            for key in sorted(agreed.keys() | held.keys()):
                if agreed.get(key) != held.get(key):
                    found.append(KeyConflict(node, partition, key, agreed.get(key), held.get(key)))
    return found


def keys_compared(log: Copy, replicas: Mapping[str, Copy], high_watermarks: Mapping[int, int]) -> int:
    """How many (partition, key) pairs the comparison covered: those present in any copy."""
    keys: set[tuple[int, str]] = set()
    for copy in (log, *replicas.values()):
        for partition, end in high_watermarks.items():
            keys.update((partition, k) for k in key_state(copy.get(partition, ()), end))
    return len(keys)


def offset_violations(copies: Mapping[str, Copy]) -> list[tuple[str, int, int, int]]:
    """Offsets of a copy not above the one stored before them: ``(copy, partition, previous, offset)``."""
    found = []
    for name, copy in sorted(copies.items()):
        for partition, records in sorted(copy.items()):
            for before, after in itertools.pairwise(records):
                if after.offset <= before.offset:
                    found.append((name, partition, before.offset, after.offset))
    return found


def _judge(latest: KeyedWrite, stored: KeyedRecord | None, writes: Mapping[str, KeyedWrite],
           unknown_tombstone: bool) -> str | None:
    """Why ``stored`` (the log's record for the key, None when it holds none) means ``latest``
    (the latest acknowledged write) was lost, or None when it does not."""
    assert latest.offset is not None
    if stored is None:
        if latest.tombstone or unknown_tombstone:
            return None  # a tombstone, removed once past delete_retention_ms
        return "no record for the key"
    write = writes.get(stored.id)
    if write is None or write.key != stored.key or write.tombstone != (stored.value is None) \
            or (stored.value is not None and stored.value != write.id):
        return "a record no write of this key made"
    if write.offset is not None:
        if write.id == latest.id and stored.offset == latest.offset:
            return None
        return "an older acknowledged write" if write.id != latest.id else "the write at another offset"
    return None if stored.offset > latest.offset else "a write of unknown outcome stored before it"


def lost_updates(events: Iterable[Event], log: Copy, high_watermarks: Mapping[int, int]) -> list[LostUpdate]:
    """Keys whose latest acknowledged write the log does not hold, and nothing written after it
    accounts for (see the module's rule (b))."""
    writes = keyed_writes(events)
    by_key: dict[str, list[KeyedWrite]] = {}
    for w in writes.values():
        by_key.setdefault(w.key, []).append(w)
    found = []
    latest_in: dict[int, dict[str, KeyedRecord]] = {
        p: latest_by_key(log.get(p, ()), end) for p, end in high_watermarks.items()}
    for key, mine in sorted(by_key.items()):
        acked = [w for w in mine if w.offset is not None]
        if not acked:
            continue
        latest = max(acked, key=lambda w: w.offset or 0)
        assert latest.offset is not None
        stored = latest_in.get(latest.partition, {}).get(key)
        unknown_tombstone = any(w.tombstone and w.offset is None for w in mine)
        reason = _judge(latest, stored, writes, unknown_tombstone)
        if reason is not None:
            found.append(LostUpdate(key, latest.partition, latest.id, latest.offset,
                                    None if stored is None else stored.id,
                                    None if stored is None else stored.offset, reason))
    return found


@dataclasses.dataclass
class CompactedResult:
    writes_acked: int
    tombstones_acked: int
    writes_unknown: int
    keys_written: int
    keys_compared: int
    replicas_compared: int
    records_in_log: int
    offsets_below_high_watermark: int
    records_by_replica: dict[str, int]  # each replica's records below the high watermark (compaction differs)
    key_conflicts: list[KeyConflict]
    lost_updates: list[LostUpdate]
    offset_violations: list[tuple[str, int, int, int]]

    @property
    def anomalies(self) -> dict[str, int]:
        return {"key_conflicts": len(self.key_conflicts), "lost_updates": len(self.lost_updates),
                "compacted_offset_order": len(self.offset_violations)}

    def summary(self) -> dict[str, Any]:
        return {"writes_acked": self.writes_acked, "tombstones_acked": self.tombstones_acked,
                "writes_unknown": self.writes_unknown, "keys_written": self.keys_written,
                "keys_compared": self.keys_compared, "replicas_compared": self.replicas_compared,
                "records_in_log": self.records_in_log,
                "offsets_below_high_watermark": self.offsets_below_high_watermark,
                "records_by_replica": dict(sorted(self.records_by_replica.items())), **self.anomalies,
                "examples": {"key_conflicts": [dataclasses.asdict(c) for c in self.key_conflicts[:10]],
                             "lost_updates": [dataclasses.asdict(u) for u in self.lost_updates[:10]],
                             "compacted_offset_order": self.offset_violations[:10]}}


def _below(copy: Copy, high_watermarks: Mapping[int, int]) -> int:
    return sum(1 for p, end in high_watermarks.items() for r in copy.get(p, ()) if r.offset < end)


def check_compacted(events: Sequence[Event], log: Copy, replicas: Mapping[str, Copy],
                    high_watermarks: Mapping[int, int]) -> CompactedResult:
    """Rules (a), (b) and (c) over one run's compacted topic."""
    writes = keyed_writes(events).values()
    return CompactedResult(
        writes_acked=sum(1 for w in writes if w.offset is not None),
        tombstones_acked=sum(1 for w in writes if w.offset is not None and w.tombstone),
        writes_unknown=sum(1 for w in writes if w.offset is None),
        keys_written=len({w.key for w in writes}),
        keys_compared=keys_compared(log, replicas, high_watermarks), replicas_compared=len(replicas),
        records_in_log=_below(log, high_watermarks), offsets_below_high_watermark=sum(high_watermarks.values()),
        records_by_replica={node: _below(copy, high_watermarks) for node, copy in replicas.items()},
        key_conflicts=key_conflicts(log, replicas, high_watermarks),
        lost_updates=lost_updates(events, log, high_watermarks),
        offset_violations=offset_violations({"log": log, **replicas}))
