"""The cluster benchmark runs end to end on a real etcd and three nodes (tiny plan) and writes
cluster.json with every figure, its min and max, and the through/straight and etcd/local ratios."""

from __future__ import annotations

import json

from benchmarks import cluster_bench
from benchmarks.__main__ import main

TINY = cluster_bench.Plan(reps=2, seconds=0.3, metadata_calls=3, read_checks=10)

def test_cluster_benchmark_writes_forwarding_and_metadata_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_bench, "QUICK", TINY)
    assert main(["cluster", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "cluster.json").read_text())
    figures, units = document["figures"], document["unit"]
    assert document["scenario"] == "cluster" and document["params"]["reps"] == 2
    assert document["params"]["nodes"] == 3
    for op in cluster_bench.OPERATIONS:
        for mode in ("straight", "through"):
            assert figures[f"{op}_{mode}_records_per_s"] > 0
            assert 0 < figures[f"{op}_{mode}_p50_ms"] <= figures[f"{op}_{mode}_p99_ms"]
        for ratio in ("throughput", "p50", "p99"):
            name = f"{op}_{ratio}_ratio"
            assert figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"] and figures[name] > 0
            assert units[name] == "through/straight"
    for op in cluster_bench.METADATA:
        for coordinator in ("etcd", "local"):
            assert 0 < figures[f"{op}_{coordinator}_p50_ms"] <= figures[f"{op}_{coordinator}_p99_ms"]
        assert figures[f"{op}_p50_ratio"] > 0 and units[f"{op}_p50_ratio"] == "etcd/local"
    assert not list(tmp_path.glob("clusterbench-*")), "the work dir is removed"
