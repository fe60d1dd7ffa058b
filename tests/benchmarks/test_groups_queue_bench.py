"""The groups and queue benchmarks run end to end against a real node (tiny plans) and write
their result files."""

from __future__ import annotations

import json

from benchmarks import groups_bench, queue_bench
from benchmarks.__main__ import main


def test_queue_benchmark_writes_its_result_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(queue_bench, "QUICK", queue_bench.Plan(reps=1, messages=2_000))
    assert main(["queue", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "queue.json").read_text())
    assert document["scenario"] == "queue" and document["params"]["workers"] == 4
    assert document["params"]["receive_batch"] == 100
    for name in ("messages_per_s", "messages_per_s_worker_processes", "receive_ms", "ack_ms"):
        assert document["figures"][name] > 0
        assert document["figures"][f"{name}_min"] <= document["figures"][name] <= document["figures"][f"{name}_max"]
    assert "messages_per_s" in capsys.readouterr().out


def test_groups_benchmark_writes_its_result_file(tmp_path, monkeypatch):
    monkeypatch.setattr(groups_bench, "QUICK", groups_bench.Plan(reps=1, records=12_000))
    assert main(["groups", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "groups.json").read_text())
    assert document["scenario"] == "groups"
    assert document["params"]["members"] == 3 and document["params"]["partitions"] == 6
    for name in ("consume_records_per_s", "consume_records_per_s_member_processes", "commit_ms", "join_ms"):
        assert document["figures"][name] > 0
