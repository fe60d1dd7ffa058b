"""The log benchmark runs end to end (on a tiny plan) and writes a DESIGN §9 result file."""

from __future__ import annotations

import json

from benchmarks import log_bench
from benchmarks.__main__ import main

TINY = log_bench.Plan(reps=3, ratio_bytes=4 << 20, append_seconds=0.01, append_bytes_max=1 << 20, encode_seconds=0.01)


def test_log_benchmark_writes_its_result_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(log_bench, "QUICK", TINY)
    assert main(["log", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "log.json").read_text())
    assert document["scenario"] == "log" and document["system"] == "logbroker"
    assert set(document["machine"]) == {"cpus", "python"}
    figures, units = document["figures"], document["unit"]
    for name in ("append_ratio", "read_ratio", "encode_records_per_s", "write_loop_mb_per_s",
                 "append_always_100b_x1_records_per_s", "append_never_1024b_x1000_mb_per_s"):
        assert figures[name] > 0 and figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"]
        assert name in units
    assert units["append_ratio"] == "ratio" and units["encode_records_per_s"] == "records/s"
    assert "append_ratio" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("logbench-")] == []
