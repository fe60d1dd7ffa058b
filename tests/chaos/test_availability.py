"""Availability of a chaos run from its events alone (``chaos.availability``): the share of seconds
with an ack, gaps charged to the fault that caused them with the faulted node's role for the
partition, the worst gap per kind, the printed lines and the plot."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chaos import availability, checker
from chaos.history import Event
from chaos.run import format_availability


def ev(f: str, type_: str, time: float, **fields: Any) -> Event:
    return {"f": f, "type": type_, "process": "x", "time": time, **fields}


def acks(partition: int, *times: float) -> list[Event]:
    return [ev("produce", "ok", t, partition=partition, value=f"v{partition}-{t}", offset=i)
            for i, t in enumerate(times)]


def fault(kind: str, target: str, start: float, end: float) -> list[Event]:
    return [ev("fault", "start", start, fault=kind, target=target), ev("fault", "end", end, fault=kind, target=target)]


def leader(partition: int, node: int, time: float, epoch: int = 1) -> Event:
    return ev("leader", "ok", time, partition=f"chaos/{partition}", leader=node, epoch=epoch)


def test_the_share_of_whole_seconds_with_an_ack():
    assert availability.seconds_with_ack([0.1, 0.5, 2.3], 0.0, 4.0) == 0.5
    assert availability.seconds_with_ack([10.2, 11.9, 13.0], 10.0, 14.9) == 0.75  # seconds 0, 1, 3 of 4
    assert availability.seconds_with_ack([], 0.0, 3.0) == 0.0
    assert availability.seconds_with_ack([], 0.0, 0.5) == 1.0, "no whole second to judge"
    assert availability.seconds_with_ack([0.5, 4.5], 1.0, 4.0) == 0.0, "acks outside the window do not count"


# Partition 0 led by node 1, partition 1 by node 2 throughout. Node 2 is killed as a follower of
# partition 0 (which stops for 0.6 s) while it leads partition 1 (which fails over in 2.5 s);
# then etcd is killed; a leader's kill of node 1 comes last.
EVENTS = [
    leader(0, 1, 0.0), leader(1, 2, 0.0),
    *acks(0, 0.5, 0.95, 1.6, 1.7, 3.0, 3.4, 6.0, 9.9),
    *acks(1, 0.5, 0.9, 3.4, 4.0, 5.0, 5.6, 9.9),
    *fault("kill_follower", "node-2", 1.0, 2.0),
    *fault("etcd_kill", "etcd", 4.2, 4.8),
    *fault("kill_leader", "node-1", 5.5, 7.0), leader(0, 3, 6.5, epoch=2),
]


def test_a_gap_is_charged_to_the_fault_overlapping_it_most_with_the_nodes_role():
    found = availability.charged_gaps(availability.ack_times(EVENTS, [0, 1]), availability.fault_spans(EVENTS),
                                      availability.leader_timelines(EVENTS, "chaos"), 0.0, 10.0)
    by_key = {(g.partition, round(g.start, 2)): (g.fault, g.role, round(g.length, 3)) for g in found}
    assert by_key[(0, 0.0)] == ("none", "", 0.5)
    # the last ack before the kill came 0.05 s before it: the kill's gap nonetheless
    assert by_key[(0, 0.95)] == ("kill_follower", "follower", 0.65)
    assert by_key[(1, 0.9)] == ("kill_follower", "leader", 2.5)
    # 0.8 s of it in the kill's quiet time, 1.3 s under etcd's kill, 0.5 s under the next fault
    assert by_key[(0, 3.4)] == ("etcd_kill", "etcd", 2.6)
    assert by_key[(1, 4.0)] == ("etcd_kill", "etcd", 1.0)
    assert by_key[(0, 6.0)] == ("kill_leader", "leader", 3.9), "the role at the fault's start"
    assert by_key[(1, 5.6)] == ("kill_leader", "follower", 4.3)


def test_the_report_gives_availability_and_the_worst_gap_per_fault_kind_and_role():
    report = availability.report(EVENTS, "chaos", [0, 1], (0.0, 10.0))
    assert report["seconds_with_ack"] == {"0": 0.5, "1": 0.5}
    assert report["worst_ack_gap_s"] == {"etcd_kill": 2.6, "kill_follower": 2.5, "kill_leader": 4.3, "none": 0.5}
    by_role = report["worst_ack_gap_by_role_s"]
    assert by_role["kill_follower"] == {"leader": 2.5, "follower": 1.3}
    assert by_role["kill_leader"] == {"leader": 3.9, "follower": 4.3}
    assert by_role["etcd_kill"] == {"etcd": 2.6}
    assert report["worst_ack_gap_follower_faults_s"] == 4.3
    assert report["worst_ack_gap_at"]["kill_leader"] == {"partition": 1, "from": 5.6, "to": 9.9,
                                                         "target": "node-1", "role": "follower"}


def test_a_split_is_no_follower_fault_and_a_partition_without_a_leader_is_said():
    events = [leader(0, 1, 0.0), *acks(0, 0.2, 3.5, 4.0), *fault("halves", "node-2", 0.3, 3.0),
              leader(0, -1, 3.6, epoch=2), *fault("kill_follower", "node-3", 3.7, 3.9)]
    report = availability.report(events, "chaos", [0], (0.0, 5.0))
    assert report["worst_ack_gap_by_role_s"]["halves"] == {"follower": 3.3}
    assert report["worst_ack_gap_by_role_s"]["kill_follower"] == {"no_leader": 1.0}
    assert report["worst_ack_gap_follower_faults_s"] == 0.0


@given(st.lists(st.floats(0.0, 60.0), max_size=40), st.lists(st.tuples(st.floats(0.0, 60.0), st.floats(0.0, 5.0)),
                                                               max_size=6))
def test_every_gap_is_charged_once_and_the_worst_is_the_checkers_longest(times: list[float],
                                                                         spans: list[tuple[float, float]]):
    events = [leader(0, 1, 0.0), *acks(0, *sorted(times))]
    for i, (start, length) in enumerate(sorted(spans)):
        events += fault(("kill_follower", "pause_leader")[i % 2], f"node-{1 + i % 3}", start, start + length)
    found = availability.charged_gaps(availability.ack_times(events, [0]), availability.fault_spans(events),
                                      availability.leader_timelines(events, "chaos"), 0.0, 60.0)
    assert abs(sum(g.length for g in found) - 60.0) < 1e-6, "the gaps tile the window, each charged once"
    starts = sorted(s for s, _ in spans)
    for g in found:
        if g.fault == "none":  # no fault began before it, or its longest part came before the first
            assert not starts or g.start < starts[0]
    report = availability.report(events, "chaos", [0], (0.0, 60.0))
    longest = checker.unavailability(events, [0], 0.0, 60.0)[0][0]
    assert max(report["worst_ack_gap_s"].values()) == longest
    assert 0.0 <= report["seconds_with_ack"]["0"] <= 1.0


def test_the_printed_summary_and_the_plot(tmp_path):
    report = availability.report(EVENTS, "chaos", [0, 1], (0.0, 10.0))
    lines = format_availability(report)
    assert lines[0] == "  availability: seconds with an ack per partition 0: 50.0%, 1: 50.0%"
    assert "kill_follower 2.50 (leader 2.50, follower 1.30)" in lines[1] and "etcd_kill 2.60," in lines[1]
    assert "only followed the partition: 4.30 s (with a leader's or etcd's fault active too: 4.30 s)" in lines[2]
    assert format_availability(None) == []
    from chaos.plot import plot

    path = tmp_path / "chaos.png"
    plot(EVENTS, {"records_acked": 15, "anomalies": {"lost": 0, "duplicated": 0}, "availability": report}, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_follower_fault_gap_that_a_leaders_fault_overlaps_is_reported_apart():
    # Partition 0 led by node 3. Node 3 is cut from etcd (its leadership lapses) and, just after the
    # cut heals, node 1 (a follower) is killed: the gap began under the leader's fault, and is
    # charged to the kill (it overlaps the kill's time most), but it is not a follower's alone.
    # Later node 2 pauses alone: that gap is a follower's.
    events = [leader(0, 3, 0.0), *acks(0, 0.2, 1.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.6, 7.0, 7.5, 8.0),
              *fault("cut_etcd", "node-3", 0.8, 1.1), *fault("kill_follower", "node-1", 1.4, 3.0),
              *fault("pause_follower", "node-2", 6.1, 6.5)]
    report = availability.report(events, "chaos", [0], (0.0, 8.0))
    assert report["worst_ack_gap_by_role_s"]["kill_follower"] == {"follower": 2.5}
    assert report["worst_ack_gap_follower_faults_overlapped_s"] == 2.5
    assert report["worst_ack_gap_follower_faults_s"] == 0.6, "the pause alone: 6.0 to 6.6"
    found = availability.charged_gaps(availability.ack_times(events, [0]), availability.fault_spans(events),
                                      availability.leader_timelines(events, "chaos"), 0.0, 8.0)
    assert {round(g.start, 1): g.roles for g in found}[1.0] == {"leader", "follower"}


def test_a_follower_that_takes_the_lead_while_faulted_is_a_leaders_fault():
    # Partition 0 led by node 2; node 1 is paused just as a failback hands it the lead (the watcher
    # sees node 1 lead 0.1 s into the pause): writes wait for node 1's lease, a leader's outage.
    # Node 3, paused later, stays a follower throughout; node 2 leads again after node 1's pause,
    # which does not make that pause a leader's.
    events = [leader(0, 2, 0.0), *acks(0, 0.5, 1.0, 3.9, 4.5, 5.0, 5.5, 6.1, 6.5, 7.0, 7.5, 8.0),
              *fault("pause_follower", "node-1", 1.05, 3.5), leader(0, 1, 1.15, epoch=2), leader(0, 2, 3.8, epoch=3),
              *fault("pause_follower", "node-3", 5.6, 6.0)]
    found = availability.charged_gaps(availability.ack_times(events, [0]), availability.fault_spans(events),
                                      availability.leader_timelines(events, "chaos"), 0.0, 8.0)
    by_start = {round(g.start, 2): (g.fault, g.role) for g in found}
    assert by_start[1.0] == ("pause_follower", "leader")
    assert by_start[5.5] == ("pause_follower", "follower")
    report = availability.report(events, "chaos", [0], (0.0, 8.0))
    assert report["worst_ack_gap_follower_faults_s"] == 0.6
    assert report["worst_ack_gap_by_role_s"]["pause_follower"] == {"leader": 2.9, "follower": 0.6}


def test_a_lead_taken_late_in_a_followers_fault_leaves_it_a_followers():
    # Node 1, cut off as a follower of partition 0, is seen leading 2 s into its fault (an election
    # that picked it): the gap is still charged to a follower's fault, not hidden as a leader's.
    events = [leader(0, 2, 0.0), *acks(0, 0.5, 1.0, 4.0, 4.5, 5.0),
              *fault("isolate", "node-1", 1.05, 3.9), leader(0, 1, 3.05, epoch=2)]
    found = availability.charged_gaps(availability.ack_times(events, [0]), availability.fault_spans(events),
                                      availability.leader_timelines(events, "chaos"), 0.0, 5.0)
    assert {round(g.start, 2): g.role for g in found}[1.0] == "follower"
