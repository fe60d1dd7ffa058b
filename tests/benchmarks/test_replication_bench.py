"""The replication benchmark end to end (tiny plan): LogBroker on etcd + three nodes and a lone
node; a peer whose cluster cannot be started is recorded with its reason, never with figures, and
the run says so by its exit code. (The peers' clients are benchmark extras that `make test` does
not install: their clusters run in `make bench`; here both peers stand for ones that failed.)"""

from __future__ import annotations

import json

import pytest

from benchmarks import replication_bench
from benchmarks.__main__ import main

TINY = replication_bench.Plan(reps=2, seconds=0.3)


def _no_cluster(_plan: replication_bench.Plan, _work_dir: str | None) -> tuple[str, dict[str, list[float]],
                                                                              dict[str, object]]:
    raise RuntimeError("rabbitmqctl join_cluster on bench-2 exited with 69: no epmd")


def _no_servers(_plan: replication_bench.Plan, _work_dir: str | None) -> tuple[str, dict[str, list[float]],
                                                                              dict[str, object]]:
    raise RuntimeError("nats-server exited before it listened")


@pytest.mark.slow
def test_replication_benchmark_writes_one_document_per_system(tmp_path, monkeypatch):
    monkeypatch.setattr(replication_bench, "QUICK", TINY)
    monkeypatch.setitem(replication_bench.RUNNERS, "rabbitmq", _no_cluster)
    monkeypatch.setitem(replication_bench.RUNNERS, "nats", _no_servers)
    out = tmp_path / "out"
    code = main(["replication", "--quick", "--out", str(out), "--work-dir", str(tmp_path)])
    assert code == 1, "a peer that could not be measured makes the run fail"
    assert sorted(p.name for p in out.iterdir()) == ["REPORT.md", "replication.logbroker.json",
                                                     "replication.nats.json", "replication.rabbitmq.json",
                                                     "throughput.png"]
    logbroker = json.loads((out / "replication.logbroker.json").read_text())
    figures, units, params = logbroker["figures"], logbroker["unit"], logbroker["params"]
    assert params["reps"] == 2 and params["record_bytes"] == 100 and params["modes"] == ["single", "r1", "r2", "r3"]
    for mode in ("single", "r1", "r2", "r3"):
        for body in ("", "_json"):
            name = f"produce_{mode}{body}"
            assert figures[f"{name}_records_per_s"] > 0 and units[f"{name}_records_per_s"] == "records/s"
            assert 0 < figures[f"{name}_p50_ms"] <= figures[f"{name}_p99_ms"]
    for mode in ("r2", "r3"):
        for base in ("single", "r1"):
            name = f"produce_{mode}_over_{base}_throughput_ratio"
            assert figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"] and figures[name] > 0
            assert units[name] == "ratio"
    placed = {mode: params[f"partitions_{mode}"] for mode in ("single", "r1", "r2", "r3")}
    assert [len(p["replicas"]) for p in placed["r3"]] == [3, 3, 3]
    assert [len(p["replicas"]) for p in placed["r2"]] == [2, 2, 2]
    assert sorted(p["leader"] for p in placed["r1"]) == [1, 2, 3], "the partitions are led by all three nodes"
    assert all(p["log_end_offset"] > 0 for ps in placed.values() for p in ps)
    assert params["all_replicas_in_sync_at_end_r3"].endswith("of 3 partitions")

    nats = json.loads((out / "replication.nats.json").read_text())
    assert nats["figures"] == {}
    assert nats["params"]["status"] == "failed: RuntimeError: nats-server exited before it listened"

    rabbitmq = json.loads((out / "replication.rabbitmq.json").read_text())
    assert rabbitmq["figures"] == {} and rabbitmq["unit"] == {}
    assert rabbitmq["params"]["status"] == ("failed: RuntimeError: rabbitmqctl join_cluster on bench-2 exited "
                                            "with 69: no epmd")
    report = (out / "REPORT.md").read_text()
    assert "## replication" in report and "| produce_r3_records_per_s | records/s |" in report
    assert [p for p in tmp_path.iterdir() if p.name.startswith(("replicationbench-", "bench-"))] == []


def test_replication_refuses_unknown_systems(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["replication", "--systems", "logbroker,kafka"])
    assert exc.value.code == 2
    assert "comma-separated subset" in capsys.readouterr().err
