"""The nearest-replica and nearest-leader benchmark end to end on a real etcd and three racked
nodes (tiny plan): the proxy's delay shows on the far side only (the leader in another rack for
reads, the topic led from the other rack for writes), so each saving is at least the added round
trip."""

from __future__ import annotations

import json

import pytest

from benchmarks import racks_bench
from benchmarks.__main__ import main

TINY = racks_bench.Plan(reps=1, fetches=8, produces=8)


@pytest.mark.slow
def test_reading_in_the_readers_rack_saves_the_delay_to_the_leaders_rack(tmp_path, monkeypatch):
    monkeypatch.setattr(racks_bench, "QUICK", TINY)
    out = tmp_path / "out"
    assert main(["racks", "--quick", "--out", str(out), "--work-dir", str(tmp_path)]) == 0
    figures = json.loads((out / "racks.json").read_text())["figures"]
    round_trip_ms = 2 * racks_bench.DELAY_MS
    assert figures["leader_fetch_p50_ms"] >= round_trip_ms
    assert figures["saved_p50_ms"] >= round_trip_ms * 0.8
    # A producer in rack b: a topic led in rack b (leader_racks) skips the proxy's round trip.
    assert figures["far_leader_produce_acks1_p50_ms"] >= round_trip_ms
    assert figures["produce_saved_acks1_p50_ms"] >= round_trip_ms * 0.8
    assert figures["produce_saved_acksall_p50_ms"] >= round_trip_ms * 0.8
