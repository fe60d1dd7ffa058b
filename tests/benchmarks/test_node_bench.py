"""The node benchmark runs end to end against a real node (tiny plan) and writes node.json."""

from __future__ import annotations

import json

from benchmarks import node_bench
from benchmarks.__main__ import main

TINY = node_bench.Plan(reps=1, produce_records=20_000, latency_seconds=0.5)


def test_node_benchmark_writes_its_result_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(node_bench, "QUICK", TINY)
    assert main(["node", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "node.json").read_text())
    figures = document["figures"]
    assert document["scenario"] == "node" and document["params"]["partitions"] == 4
    for name in ("produce_records_per_s", "consume_records_per_s", "consume_raw_records_per_s",
                 "latency_p50_ms", "latency_p99_ms"):
        assert figures[name] > 0
    assert figures["latency_p50_ms"] <= figures["latency_p99_ms"] <= figures["latency_p999_ms"]
    assert "produce_records_per_s" in capsys.readouterr().out
