"""The gRPC-against-HTTP benchmark end to end on a real node (tiny plan): grpc.json holds every
figure with its min and max (the bare grpcio ceiling too), the ratios are the figures' ratios, and
the work dir is gone after."""

from __future__ import annotations

import json
import os

from benchmarks import grpc_bench
from benchmarks.__main__ import main

TINY = grpc_bench.Plan(reps=2, seconds=0.3, subscribe_records=300)


def test_the_grpc_benchmark_measures_both_apis(tmp_path, monkeypatch):
    monkeypatch.setattr(grpc_bench, "QUICK", TINY)
    out = tmp_path / "out"
    assert main(["grpc", "--quick", "--out", str(out), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((out / "grpc.json").read_text())
    figures, units = document["figures"], document["unit"]
    for api in ("http", "grpc"):
        for what in ("publish", "subscribe"):
            name = f"{api}_{what}"
            assert 0 < figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"], name
            assert units[name] == "records/s"
        assert figures[f"{api}_publish_p99_ms"] > 0 and units[f"{api}_publish_p99_ms"] == "ms"
    assert figures["grpc_batches_subscribe"] > 0 and figures["grpcio_ceiling_subscribe"] > 0
    assert figures["grpc_over_grpcio_ceiling_subscribe_ratio"] > 0 and figures["grpc_over_http_publish_p99_ratio"] > 0
    assert units["grpc_over_http_publish_ratio"] == "grpc/http"
    assert not [p for p in os.listdir(tmp_path) if p.startswith("grpcbench-")]
