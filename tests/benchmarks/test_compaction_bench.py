"""The compaction benchmark runs end to end (tiny plan): a node compacts a dirty topic while traffic
is measured, the in-process pass is timed, and compaction.json holds every figure and ratio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import compaction_bench
from benchmarks.__main__ import main
from segments.config import MIB

TINY = compaction_bench.Plan(reps=2, dirty_mib=10, cleaner_mib=10)
PHASE_FIGURES = ("produce_p50_ms", "produce_p99_ms", "end_to_end_p50_ms", "end_to_end_p99_ms")


def test_compaction_benchmark_writes_figures_and_ratios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction_bench, "QUICK", TINY)
    monkeypatch.setattr(compaction_bench, "FIRST_QUIET_S", 1.0)
    assert main(["compaction", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "compaction.json").read_text())
    figures = document["figures"]
    assert document["scenario"] == "compaction" and document["params"]["reps"] == 2
    for name in PHASE_FIGURES:
        assert figures[f"quiet_{name}"] > 0 and figures[f"compacting_{name}"] > 0
        ratio = name.removesuffix("_ms") + "_ratio"
        assert figures[f"{ratio}_min"] <= figures[ratio] <= figures[f"{ratio}_max"]
    assert figures["cleaner_mib_per_s"] > 0 and figures["node_pass_mib_per_s"] > 0
    assert 0 < figures["cleaner_kept_share"] < 0.5  # nearly every record is superseded


def test_the_cleaner_pass_keeps_one_record_per_key(tmp_path: Path) -> None:
    figures = compaction_bench.cleaner_mib_per_s(4, str(tmp_path))
    batch_bytes = len(compaction_bench.keyed_batches(1)[0])
    kept_bytes = compaction_bench.KEYS // compaction_bench.BATCH_RECORDS * batch_bytes
    written = 4 * MIB // batch_bytes * batch_bytes
    assert figures["cleaner_kept_share"] == pytest.approx(kept_bytes / written, rel=0.05)
