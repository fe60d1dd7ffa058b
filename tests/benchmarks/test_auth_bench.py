"""The auth benchmark runs both nodes end to end (tiny plan) and writes auth.json with ratios."""

from __future__ import annotations

import json

from benchmarks import auth_bench
from benchmarks.__main__ import main

TINY = auth_bench.Plan(reps=2, big_batch_records=20_000, small_batch_records=1_000)


def test_auth_benchmark_writes_figures_and_ratios(tmp_path, monkeypatch):
    monkeypatch.setattr(auth_bench, "QUICK", TINY)
    monkeypatch.setattr(auth_bench, "AUTH_PATH_CALLS", 100)
    assert main(["auth", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "auth.json").read_text())
    figures = document["figures"]
    assert document["scenario"] == "auth" and document["params"]["reps"] == 2
    for name in ("produce_batch1000_records_per_s", "produce_batch10_records_per_s", "consume_raw_records_per_s"):
        assert figures[f"auth_on_{name}"] > 0 and figures[f"auth_off_{name}"] > 0
        assert figures[f"{name}_ratio_min"] <= figures[f"{name}_ratio"] <= figures[f"{name}_ratio_max"]
    assert 0 < figures["auth_path_us_per_request"] < 10_000
