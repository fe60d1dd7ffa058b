"""The compacted topic's checks alone (``chaos.compacted``): hand-made copies with one anomaly
each, and generated executions (a simulated broker storing every keyed write once, in order, each
replica compacting at its own points) that must pass until an acknowledged update is dropped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from chaos import checker
from chaos.compacted import KeyedRecord, check_compacted, key_conflicts, key_state, lost_updates, offset_violations
from chaos.history import Event
from chaos.run import stored_records
from chaos.workload import compaction_figures
from segments.batch import ProducerRecord, encode_batch
from segments.config import LogConfig
from segments.log import PartitionLog
from segments.reader import SegmentReader


def ev(type_: str, time: float, write: str, key: str, partition: int = 0, *, tombstone: bool = False,
       **fields: Any) -> Event:
    return {"f": "kv_write", "type": type_, "process": "k0", "time": time, "key": key, "id": write,
            "value": None if tombstone else write, "partition": partition, **fields}


def put(write: str, key: str, offset: int | None, t: float, *, tombstone: bool = False,
        partition: int = 0) -> list[Event]:
    """A keyed write: acknowledged at ``offset``, or of unknown outcome (None)."""
    done = (ev("ok", t + 0.5, write, key, partition, tombstone=tombstone, offset=offset) if offset is not None
            else ev("info", t + 0.5, write, key, partition, tombstone=tombstone, error="504"))
    return [ev("invoke", t, write, key, partition, tombstone=tombstone), done]


def rec(offset: int, key: str, write: str, *, tombstone: bool = False) -> KeyedRecord:
    return KeyedRecord(offset, key, None if tombstone else write, write)


# a: w1, w2 (w2 acknowledged last); b: w3 then a tombstone w4; c: w5 of unknown outcome.
EVENTS = [*put("w1", "a", 0, 1.0), *put("w3", "b", 1, 2.0), *put("w2", "a", 2, 3.0),
          *put("w4", "b", 3, 4.0, tombstone=True), *put("w5", "c", None, 5.0)]
FULL = {0: [rec(0, "a", "w1"), rec(1, "b", "w3"), rec(2, "a", "w2"), rec(3, "b", "w4", tombstone=True),
            rec(4, "c", "w5")]}
COMPACTED = {0: [rec(2, "a", "w2"), rec(4, "c", "w5")]}  # w1, w3 superseded; the tombstone past its retention
ENDS = {0: 5}


def test_copies_compacted_at_different_points_agree_by_key():
    assert key_state(FULL[0], 5) == key_state(COMPACTED[0], 5) == {"a": "w2", "c": "w5"}
    result = check_compacted(EVENTS, FULL, {"node-1": FULL, "node-2": COMPACTED}, ENDS)
    assert result.anomalies == {"key_conflicts": 0, "lost_updates": 0, "compacted_offset_order": 0}
    assert (result.writes_acked, result.tombstones_acked, result.writes_unknown) == (4, 1, 1)
    assert result.keys_compared == 2 and result.records_in_log == 5 and result.offsets_below_high_watermark == 5
    assert result.records_by_replica == {"node-1": 5, "node-2": 2}


def test_a_replica_missing_a_keys_latest_value_or_holding_a_stale_one():
    missing = {0: [rec(0, "a", "w1"), rec(1, "b", "w3"), rec(2, "a", "w2"), rec(3, "b", "w4", tombstone=True)]}
    stale = {0: [rec(0, "a", "w1"), rec(4, "c", "w5")]}
    resurrected = {0: [rec(1, "b", "w3"), rec(2, "a", "w2"), rec(4, "c", "w5")]}  # the tombstone never came
    found = key_conflicts(FULL, {"node-1": missing, "node-2": stale, "node-3": resurrected}, ENDS)
    assert [(c.node, c.key, c.log, c.replica) for c in found] == [
        ("node-1", "c", "w5", None), ("node-2", "a", "w2", "w1"), ("node-3", "b", None, "w3")]


def test_a_replicas_tail_above_the_high_watermark_is_no_conflict():
    tail = {0: [*COMPACTED[0], rec(5, "a", "w9")]}
    assert key_conflicts(FULL, {"node-1": tail}, ENDS) == []
    assert key_conflicts(FULL, {"node-1": tail}, {0: 6})[0].replica == "w9"


def test_a_lost_acknowledged_update():
    older = {0: [rec(0, "a", "w1"), rec(4, "c", "w5")]}
    assert [(u.key, u.acked, u.stored, u.reason) for u in lost_updates(EVENTS, older, ENDS)] == [
        ("a", "w2", "w1", "an older acknowledged write")]
    gone = {0: [rec(4, "c", "w5")]}
    assert [(u.key, u.stored, u.reason) for u in lost_updates(EVENTS, gone, ENDS)] == [
        ("a", None, "no record for the key")]
    result = checker.check([], {0: {}}, {}, partitions=[0], window=(0.0, 1.0),
                           compacted=check_compacted(EVENTS, older, {}, ENDS))
    assert not result.valid and result.anomalies["lost_updates"] == 1
    assert result.summary()["compacted_topic"]["lost_updates"] == 1


def test_an_acknowledged_write_stored_again_later_hides_the_latest():
    again = {0: [rec(2, "a", "w2"), rec(4, "c", "w5"), rec(6, "a", "w1")]}
    assert [u.reason for u in lost_updates(EVENTS, again, {0: 7})] == ["an older acknowledged write"]


def test_writes_of_unknown_outcome_count_only_after_the_acknowledged_one():
    events = [*EVENTS, *put("w6", "a", None, 6.0)]
    after = {0: [*COMPACTED[0], rec(5, "a", "w6")]}
    assert lost_updates(events, after, {0: 6}) == []
    before = {0: [rec(1, "a", "w6"), rec(4, "c", "w5")]}
    assert [u.reason for u in lost_updates(events, before, ENDS)] == ["a write of unknown outcome stored before it"]
    foreign = {0: [rec(2, "a", "w5"), rec(4, "c", "w5")]}
    assert [u.reason for u in lost_updates(events, foreign, ENDS)] == ["a record no write of this key made"]


def test_a_key_may_be_absent_only_after_a_tombstone():
    assert lost_updates(EVENTS, COMPACTED, ENDS) == [], "b's acknowledged tombstone, removed once old"
    events = [*EVENTS, *put("w7", "a", None, 6.0, tombstone=True)]
    assert lost_updates(events, {0: [rec(4, "c", "w5")]}, ENDS) == [], "a's tombstone of unknown outcome"


def test_offsets_stored_twice_or_backwards():
    copies = {"node-1": {0: [rec(0, "a", "w1"), rec(2, "a", "w2"), rec(2, "a", "w2"), rec(1, "b", "w3")]}}
    assert offset_violations(copies) == [("node-1", 0, 2, 2), ("node-1", 0, 2, 1)]
    assert offset_violations({"log": FULL}) == []


def test_a_run_without_a_compacted_topic_says_it_was_not_checked():
    result = checker.check([], {0: {}}, {}, partitions=[0], window=(0.0, 1.0))
    assert result.summary()["compacted_topic"] == {"checked": False}
    assert "key_conflicts" not in result.anomalies


class _Compaction(Collector):
    """The node's compaction families (``logbroker.metrics``), as they are exposed."""

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        last = GaugeMetricFamily("logbroker_compaction_last_timestamp_seconds", "", labels=["topic", "partition"])
        removed = CounterMetricFamily("logbroker_compaction_bytes_removed", "", labels=["topic", "partition"])
        for topic, partition, when, size in [("kv", "0", 1.7e9, 4096), ("kv", "1", 0.0, 0), ("other", "0", 5.0, 9)]:
            last.add_metric([topic, partition], when)
            removed.add_metric([topic, partition], size)
        yield from (last, removed)


def test_compaction_figures_from_a_nodes_metrics():
    registry = CollectorRegistry()
    registry.register(_Compaction())
    assert compaction_figures(generate_latest(registry).decode(), "kv") == [(0, 1.7e9, 4096.0), (1, 0.0, 0.0)]


# ---- generated executions ----------------------------------------------------------------------

KEYS = ["k0", "k1", "k2", "k3"]
OPS = st.lists(st.tuples(st.sampled_from(KEYS), st.booleans(), st.sampled_from(["ok", "ok", "ok", "info", "lost"])),
               min_size=1, max_size=40)


def simulate(ops: list[tuple[str, bool, str]]) -> tuple[list[Event], list[KeyedRecord]]:
    """A correct broker with one partition: every write it stores gets the next offset; an
    ``info`` write is stored, a ``lost`` one (the request never arrived) is not; a flagged write
    is a tombstone."""
    records: list[KeyedRecord] = []
    events: list[Event] = []
    for i, (key, flag, outcome) in enumerate(ops):
        write, tombstone = f"w{i}", flag
        offset = len(records)
        if outcome != "lost":
            records.append(rec(offset, key, write, tombstone=tombstone))
        events += put(write, key, offset if outcome == "ok" else None, float(i), tombstone=tombstone)
    return events, records


def compact(records: list[KeyedRecord], upto: int, drop_tombstones: bool) -> list[KeyedRecord]:
    """What a pass over the records below ``upto`` keeps: each key's latest (a tombstone too,
    unless ``drop_tombstones``), and always the last one; the rest is left alone."""
    head = [r for r in records if r.offset < upto]
    latest = {r.key: r.offset for r in head}
    last = head[-1].offset if head else -1
    kept = [r for r in head if r.offset == last
            or (latest[r.key] == r.offset and not (drop_tombstones and r.value is None))]
    return kept + [r for r in records if r.offset >= upto]


@given(OPS, st.data())
def test_a_correct_execution_compacted_anywhere_is_valid(ops, data):
    events, records = simulate(ops)
    end = len(records)
    replicas = {f"node-{n}": {0: compact(records, data.draw(st.integers(0, end)), data.draw(st.booleans()))}
                for n in range(1, 4)}
    log = {0: compact(records, data.draw(st.integers(0, end)), data.draw(st.booleans()))}
    result = check_compacted(events, log, replicas, {0: end})
    assert result.anomalies == {"key_conflicts": 0, "lost_updates": 0, "compacted_offset_order": 0}, (
        result.key_conflicts, result.lost_updates)


@given(OPS, st.data())
def test_dropping_a_keys_latest_acknowledged_value_is_found(ops, data):
    events, records = simulate(ops)
    latest = {r.key: r for r in records}
    acked = {e["id"] for e in events if e["type"] == "ok"}
    victims = [r for r in latest.values() if r.value is not None and r.id in acked]
    if not victims:
        return
    victim = data.draw(st.sampled_from(victims))
    log = {0: [r for r in compact(records, data.draw(st.integers(0, len(records))), False) if r != victim]}
    unknown_tombstone = any(e["type"] == "info" and e["key"] == victim.key and e["value"] is None for e in events)
    still = [r for r in log[0] if r.key == victim.key]
    if unknown_tombstone and not still:
        return  # the key may have been deleted by a tombstone whose outcome is unknown
    assert [u.key for u in lost_updates(events, log, {0: len(records)})] == [victim.key]
    assert [c.key for c in key_conflicts(log, {"node-1": {0: records}}, {0: len(records)})] == [victim.key]


def test_a_copy_whose_first_segments_are_gone_is_read_from_its_own_log_start(tmp_path: Path) -> None:
    """Compaction can empty and remove a copy's first segments: the final read of each node's
    copy starts where that copy starts, not at offset 0."""
    log = PartitionLog.open(str(tmp_path), LogConfig(segment_bytes=200, flush="never"))
    for i in range(12):
        log.append(encode_batch([ProducerRecord(b"v%d" % i, key=b"k%d" % i)]), leader_epoch=0)
    log.roll()
    assert log.delete_before(6) > 0 and log.log_start_offset > 0
    start = log.log_start_offset
    log.close()
    records = stored_records(SegmentReader(str(tmp_path)), None)
    assert [r.offset for r in records] == list(range(start, 12))
