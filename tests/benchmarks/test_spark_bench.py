"""The Spark benchmark runs end to end (tiny plan: a real node and a real SparkSession) and writes
spark.json with the direct and HTTP figures and their ratio."""

from __future__ import annotations

import json

from benchmarks import spark_bench
from benchmarks.__main__ import main

TINY = spark_bench.Plan(reps=1, records=40_000)


def test_spark_benchmark_writes_its_result_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(spark_bench, "QUICK", TINY)
    assert main(["spark", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "spark.json").read_text())
    figures = document["figures"]
    assert document["scenario"] == "spark" and document["params"]["records"] == 40_000
    for name in ("direct_records_per_s", "http_records_per_s", "spark_only_records_per_s", "direct_over_http",
                 "tasks_direct_records_per_s", "tasks_http_records_per_s", "tasks_direct_over_http"):
        assert figures[name] > 0 and figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"]
    ratio = figures["direct_records_per_s"] / figures["http_records_per_s"]
    assert abs(figures["direct_over_http"] - ratio) < 0.01 * ratio  # one repetition: the ratio of the two
    assert "records/s" in capsys.readouterr().out
