"""The history checker alone: small hand-made histories with one anomaly each, and generated
executions (a simulated broker that stores every write once, in order) that must pass until one
record is dropped, stored twice or moved."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chaos import checker
from chaos.history import Event, History, read_jsonl


def ev(f: str, type_: str, time: float, process: str = "p0", **fields: Any) -> Event:
    return {"f": f, "type": type_, "process": process, "time": time, **fields}


def write(value: str, partition: int, offset: int | None, seq: int, t: float, process: str = "p0") -> list[Event]:
    events = [ev("produce", "invoke", t, process, value=value, partition=partition, seq=seq)]
    if offset is None:
        events.append(ev("produce", "info", t + 0.5, process, value=value, partition=partition, error="504"))
    else:
        events.append(ev("produce", "ok", t + 0.5, process, value=value, partition=partition, offset=offset))
    return events


def run_check(events: list[Event], log: dict[int, dict[int, str]], replicas: Any = None, **kw: Any) -> checker.Result:
    return checker.check(events, log, replicas or {"node-1": log}, partitions=sorted(log), window=(0.0, 10.0), **kw)


BASE = [*write("a", 0, 0, 0, 1.0), *write("b", 0, 1, 1, 2.0), *write("c", 1, 0, 2, 3.0), *write("d", 1, None, 3, 4.0)]
LOG = {0: {0: "a", 1: "b"}, 1: {0: "c"}}


def test_a_clean_history_is_valid():
    result = run_check(BASE, LOG)
    assert result.valid, result.anomalies
    summary = result.summary()
    assert summary["records_acked"] == 3 and summary["records_unknown"] == 1 and summary["records_unknown_stored"] == 0
    assert summary["anomalies"]["lost"] == 0


def test_an_unknown_write_may_be_stored_once():
    result = run_check(BASE, {0: {0: "a", 1: "b"}, 1: {0: "c", 1: "d"}})
    assert result.valid and result.unknown_stored == 1


def test_a_lost_and_a_misplaced_acknowledged_record():
    lost = run_check(BASE, {0: {0: "a"}, 1: {0: "c"}})
    assert [a.value for a in lost.lost] == ["b"] and not lost.valid
    moved = run_check(BASE, {0: {0: "a", 1: "x", 2: "b"}, 1: {0: "c"}})
    assert [a.value for a in moved.misplaced] == ["b"] and not moved.lost


def test_a_value_stored_twice_is_a_duplicate():
    result = run_check(BASE, {0: {0: "a", 1: "b", 2: "a"}, 1: {0: "c", 1: "d", 2: "d"}})
    assert result.duplicated == {"a": 2, "d": 2} and not result.valid


def test_a_producers_records_out_of_order():
    events = [*write("a", 0, 1, 0, 1.0), *write("b", 0, 0, 1, 2.0), *write("c", 0, 2, 0, 1.0, process="p1")]
    result = run_check(events, {0: {0: "b", 1: "a", 2: "c"}})
    assert result.reordered == [("p0", 0, "a", "b")]


def test_a_replica_holding_another_value_below_the_high_watermark():
    replicas = {"node-1": LOG, "node-2": {0: {0: "a", 1: "z"}, 1: {0: "c", 1: "tail"}}}
    result = run_check(BASE, LOG, replicas)
    assert result.replica_conflicts == [("node-2", 0, 1, "b", "z")], "an uncommitted tail is no conflict"


def test_a_read_the_final_log_contradicts():
    events = [*BASE, ev("read", "ok", 5.0, "reader", partition=0, records=[[0, "a"], [1, "q"]])]
    assert run_check(events, LOG).dirty_reads == [("reader", 0, 1, "q")]


def test_committed_offsets_going_backwards():
    steady = [ev("commit", "ok", 2.0, "g", offsets=[[0, 5]], invoke_time=1.0),
              ev("committed", "ok", 2.0, "o", offsets=[[0, 4]], invoke_time=1.5),  # overlapped: no order
              ev("commit", "ok", 4.0, "g", offsets=[[0, 9], [1, 3]], invoke_time=3.0),
              ev("committed", "ok", 5.0, "o", offsets=[[0, 9], [1, 3]], invoke_time=4.5)]
    assert checker.commit_regressions(steady) == []
    back = [*steady, ev("committed", "ok", 7.0, "o", offsets=[[0, 2], [1, 3]], invoke_time=6.0)]
    assert checker.commit_regressions(back) == [{"partition": 0, "offset": 2, "earlier": 9, "process": "o",
                                                 "time": 7.0}]


def test_an_acknowledged_queue_message_delivered_again():
    events = [ev("queue_send", "ok", 1.0, "q", value="m1"), ev("queue_send", "ok", 1.0, "q", value="m2"),
              ev("deliver", "ok", 2.0, "r1", invoke_time=1.5, values=[["m1", 1, "0:0"], ["m2", 1, "0:1"]]),
              ev("queue_ack", "ok", 3.0, "r1", ids=["0:0"]),
              ev("deliver", "ok", 4.0, "r2", invoke_time=2.5, values=[["m1", 2, "0:0"]]),  # began before the ack
              ev("deliver", "ok", 6.0, "r2", invoke_time=5.0, values=[["m2", 2, "0:1"]])]
    assert checker.queue_redeliveries(events) == []
    again = [*events, ev("deliver", "ok", 8.0, "r2", invoke_time=7.0, values=[["m1", 3, "0:0"]])]
    assert [r["id"] for r in checker.queue_redeliveries(again)] == ["0:0"]
    assert checker.queue_lost(events) == []
    assert checker.queue_lost([*events, ev("queue_send", "ok", 9.0, "q", value="m3")]) == ["m3"]
    result = run_check([*BASE, *again], LOG, queue_drained=True)
    assert result.anomalies["queue_redelivered_after_ack"] == 1 and not result.valid


def test_longest_unavailability_and_leader_changes():
    events = [*write("a", 0, 0, 0, 1.0), *write("b", 0, 1, 1, 7.0), *write("c", 1, 0, 2, 2.0)]
    assert checker.unavailability(events, [0, 1, 2], 0.0, 10.0) == {
        0: (6.0, 1.5, 7.5), 1: (7.5, 2.5, 10.0), 2: (10.0, 0.0, 10.0)}
    leaders = [ev("leader", "ok", t, "w", partition=key, leader=leader, epoch=epoch)
               for t, key, leader, epoch in [(0, "t/0", 1, 0), (1, "t/0", -1, 0), (2, "t/0", 2, 1), (3, "t/0", 2, 1),
                                             (4, "t/0", 1, 2), (0, "t/1", 3, 0)]]
    assert checker.leader_changes(leaders) == {"t/0": 2}


def test_a_history_goes_through_jsonl(tmp_path):
    history = History()
    history.add("produce", "invoke", "p0", value="a", partition=0, seq=0)
    history.add("fault", "start", "nemesis", fault="kill", target="node-1", time=3.5)
    path = tmp_path / "h.jsonl"
    with open(path, "w") as f:
        history.write(f)
    with open(path) as f:
        assert read_jsonl(f) == history.snapshot()
    assert history.snapshot()[1]["time"] == 3.5


# ---- generated executions ----------------------------------------------------------------------

OPS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from(["ok", "ok", "ok", "info", "lost"])),
               min_size=1, max_size=60)


def simulate(ops: list[tuple[int, int, str]]) -> tuple[list[Event], dict[int, dict[int, str]]]:
    """A correct broker: every write it stores gets the next offset of its partition; an ``info``
    write is stored, a ``lost`` one (the request never arrived) is not."""
    log: dict[int, dict[int, str]] = {0: {}, 1: {}, 2: {}}
    events: list[Event] = []
    for i, (producer, partition, outcome) in enumerate(ops):
        value, offset = f"p{producer}-{i}", len(log[partition])
        if outcome != "lost":
            log[partition][offset] = value
        events += write(value, partition, offset if outcome == "ok" else None, i, float(i), f"p{producer}")
    return events, log


@given(OPS)
def test_a_correct_execution_is_valid(ops):
    events, log = simulate(ops)
    replicas = {"node-1": log, "node-2": {p: dict(list(r.items())[: len(r) // 2]) for p, r in log.items()}}
    result = checker.check(events, log, replicas, partitions=range(3), window=(0.0, float(len(ops))))
    assert result.valid, result.anomalies
    assert result.acked == sum(1 for _, _, outcome in ops if outcome == "ok")


@given(OPS, st.data())
def test_dropping_or_doubling_an_acknowledged_record_is_found(ops, data):
    events, log = simulate(ops)
    acked = checker.acked_writes(events)
    if not acked:
        return
    victim = data.draw(st.sampled_from(acked))
    dropped = {p: {o: v for o, v in r.items() if v != victim.value} for p, r in log.items()}
    assert [a.value for a in checker.check(events, dropped, {}, partitions=range(3), window=(0, 1)).lost] == [
        victim.value]
    doubled = {p: dict(r) for p, r in log.items()}
    target = data.draw(st.integers(0, 2))
    doubled[target][len(doubled[target])] = victim.value
    assert checker.duplicates(doubled) == {victim.value: 2}


@given(OPS, st.data())
def test_swapping_two_acknowledged_records_is_found(ops, data):
    events, log = simulate(ops)
    by_partition = [[a for a in checker.acked_writes(events) if a.partition == p] for p in range(3)]
    candidates = [writes for writes in by_partition if len(writes) >= 2]
    if not candidates:
        return
    writes = data.draw(st.sampled_from(candidates))
    first, second = sorted(data.draw(st.lists(st.sampled_from(writes), min_size=2, max_size=2, unique=True)),
                           key=lambda a: a.offset)
    swapped = {p: dict(r) for p, r in log.items()}
    swapped[first.partition][first.offset], swapped[first.partition][second.offset] = second.value, first.value
    result = checker.check(events, swapped, {}, partitions=range(3), window=(0, 1))
    assert {a.value for a in result.misplaced} == {first.value, second.value} and not result.valid


@given(st.lists(st.integers(0, 50), min_size=1, max_size=30))
def test_commits_in_sequence_regress_exactly_when_a_later_one_is_lower(offsets):
    events = [ev("commit", "ok", 2.0 * i + 1, "g", offsets=[[0, o]], invoke_time=2.0 * i)
              for i, o in enumerate(offsets)]
    found = checker.commit_regressions(events)
    expected = [o for i, o in enumerate(offsets) if i and max(offsets[:i]) > o]
    assert [r["offset"] for r in found] == expected
