"""The Kafka-against-HTTP benchmark end to end on a real node (tiny plan): kafka.json holds every
figure with its min and max, the ratios, and the work dir is gone after."""

from __future__ import annotations

import json
import os

from benchmarks import kafka_bench
from benchmarks.__main__ import main

TINY = kafka_bench.Plan(reps=2, records=3_000, latency_seconds=0.2)


def test_the_kafka_benchmark_measures_both_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(kafka_bench, "QUICK", TINY)
    out = tmp_path / "out"
    assert main(["kafka", "--quick", "--out", str(out), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((out / "kafka.json").read_text())
    figures, units = document["figures"], document["unit"]
    for api in ("kafka", "http"):
        for what in ("produce", "consume"):
            name = f"{api}_{what}"
            assert 0 < figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"], name
            assert units[name] == "records/s"
    for name in ("p50", "p99", "max"):
        figure = f"kafka_latency_{kafka_bench.LATENCY_RATE}_{name}_ms"
        assert 0 < figures[f"{figure}_min"] <= figures[figure] <= figures[f"{figure}_max"], figure
        assert units[figure] == "ms"
    for what in ("produce", "consume"):
        assert figures[f"kafka_over_http_{what}_ratio"] > 0 and units[f"kafka_over_http_{what}_ratio"] == "kafka/http"
    assert not [p for p in os.listdir(tmp_path) if p.startswith("kafkabench-")]
