"""The encryption benchmark runs its three modes end to end (tiny plan) and writes encryption.json
with figures and ratios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import encryption_bench
from benchmarks.__main__ import main

TINY = encryption_bench.Plan(reps=3, big_batch_records=20_000, small_batch_records=1_000)
NAMES = ("produce_batch1000_records_per_s", "produce_batch10_records_per_s", "consume_raw_records_per_s",
         "consume_decoded_records_per_s")


def test_encryption_benchmark_writes_figures_and_ratios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encryption_bench, "QUICK", TINY)
    monkeypatch.setattr(encryption_bench, "CIPHER_ROUNDS", 40)
    assert main(["encryption", "--quick", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "out" / "encryption.json").read_text())
    figures = document["figures"]
    assert document["scenario"] == "encryption" and document["params"]["reps"] == 3
    for name in NAMES:
        for mode in encryption_bench.MODES:
            assert figures[f"encryption_{mode}_{name}"] > 0
        for mode in ("on", "keyed_plain"):
            assert figures[f"{mode}_{name}_ratio_min"] <= figures[f"{mode}_{name}_ratio"] \
                <= figures[f"{mode}_{name}_ratio_max"]
    assert figures["seal_mib_per_s"] > 0 and figures["open_mib_per_s"] > 0
