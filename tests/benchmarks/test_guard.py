"""The regression gate's runs: rows from runs, what a tree cannot run, its temporary worktrees
(always removed), and one short run end to end (the gate against itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

from benchmarks import guard
from benchmarks.guard_scenarios import SCENARIOS, Scenario
from benchmarks.guard_verdict import Figure

LATENCY = SCENARIOS["latency"]
P99 = "latency_5000_100b_p99_ms"


def outcome(**figures: float) -> guard.RunOutcome:
    return guard.RunOutcome(seconds=1.0, figures=dict(figures))


def temporary_worktrees() -> list[str]:
    listed = subprocess.run(["git", "-C", guard.ROOT, "worktree", "list", "--porcelain"], capture_output=True,
                            text=True, check=True).stdout
    return [line for line in listed.splitlines() if line.startswith("worktree ") and guard.WORKTREE_PREFIX in line]


def test_rows_judge_the_pairs_a_failed_candidate_run_is_an_error_and_a_missing_figure_is_said():
    base = [outcome(**{P99: 3.0}) for _ in range(5)]
    cand = [outcome(**{P99: 15.0}) for _ in range(5)]
    rows = {r.figure.name: r for r in guard.rows_for(LATENCY, None, {"baseline": base, "candidate": cand})}
    assert rows[P99].verdict == "worse"
    # The other latency figures are in neither side's files: the baseline's lack is said.
    assert rows["latency_1000_100b_p50_ms"].verdict == "skipped"
    assert "has no latency_1000_100b_p50_ms" in rows["latency_1000_100b_p50_ms"].note

    broken = [*cand[:2], guard.RunOutcome(seconds=1.0, error="exit status 1"), *cand[3:]]
    rows = {r.figure.name: r for r in guard.rows_for(LATENCY, None, {"baseline": base, "candidate": broken})}
    assert rows[P99].verdict == "error" and "pair 3" in rows[P99].note

    # A failed baseline run only drops its pair.
    lost = [*base[:2], guard.RunOutcome(seconds=1.0, error="exit status 1"), *base[3:]]
    rows = {r.figure.name: r for r in guard.rows_for(LATENCY, None, {"baseline": lost, "candidate": cand})}
    assert rows[P99].verdict == "inconclusive" and rows[P99].pairs == 4


def test_a_scenario_a_side_cannot_run_is_skipped_on_every_row_with_the_reason():
    rows = guard.rows_for(SCENARIOS["replication"], "baseline c63d20c0a has no `replication` benchmark",
                          {"baseline": [None] * 5, "candidate": [None] * 5})
    assert [r.verdict for r in rows] == ["skipped"] * len(SCENARIOS["replication"].figures)
    assert all("no `replication` benchmark" in r.note for r in rows)


def test_a_tree_without_the_command_or_a_flag_cannot_run_it():
    tree = guard.working_tree()
    assert guard.unavailable(tree, SCENARIOS["latency"]) is None
    nosuch = Scenario("nosuch", ("nosuch", "--quick"), "nosuch.json", ())
    assert "has no `nosuch` benchmark" in (guard.unavailable(tree, nosuch) or "")
    flagless = Scenario("log", ("log", "--quick", "--systems", "logbroker"), "log.json", ())
    assert (guard.unavailable(tree, flagless) or "").endswith("`log` has no --systems")


def test_the_temporary_worktrees_are_removed_even_when_the_gate_is_interrupted(monkeypatch, tmp_path):
    before = temporary_worktrees()
    scratch = tmp_path / "temp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def interrupted(*_args: object) -> guard.RunOutcome:
        assert len(temporary_worktrees()) == len(before) + 2
        assert len(os.listdir(scratch)) == 1
        raise KeyboardInterrupt

    monkeypatch.setattr(guard, "run_once", interrupted)
    with pytest.raises(KeyboardInterrupt):
        guard.guard(baseline="HEAD", candidate="HEAD~1", scenarios=["produce"], repeat=1,
                    out_dir=str(tmp_path / "out"))
    assert temporary_worktrees() == before
    assert os.listdir(scratch) == []


def test_an_unknown_ref_is_a_usage_error_and_leaves_nothing(tmp_path):
    before = temporary_worktrees()
    done = subprocess.run([sys.executable, "-m", "benchmarks", "guard", "--baseline", "no-such-ref-anywhere",
                           "--out", str(tmp_path)], cwd=guard.ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": guard.ROOT})
    assert done.returncode == 2
    assert "'no-such-ref-anywhere' is not a commit" in done.stderr
    assert temporary_worktrees() == before


def test_the_gate_runs_a_commit_against_itself_end_to_end(monkeypatch, tmp_path):
    # One quick produce run per side (about 10 s each): the table, guard.json, and no worktree left.
    before = temporary_worktrees()
    figure = Figure("produce", "produce_100b_records_per_s", "produce 100 B", "records/s", higher_is_better=True,
                    tolerance=1.10)
    monkeypatch.setitem(SCENARIOS, "produce", Scenario("produce", SCENARIOS["produce"].argv,
                                                       "produce.logbroker.json", (figure,), timeout_s=120.0))
    code = guard.guard(baseline="HEAD", candidate=None, scenarios=["produce"], repeat=1, out_dir=str(tmp_path))
    assert code == 0
    with open(tmp_path / "guard.json", encoding="utf-8") as f:
        document = json.load(f)
    assert document["verdict"] == "pass"
    assert [(r["side"], r["error"]) for r in document["runs"]] == [("baseline", None), ("candidate", None)]
    assert document["sides"]["candidate"]["path"] == guard.ROOT
    assert document["sides"]["baseline"]["path"] != guard.ROOT
    [row] = document["rows"]
    assert row["verdict"] == "inconclusive" and row["pairs"] == 1 and row["baseline_median"] > 0
    assert os.path.exists(tmp_path / "runs" / "pair1-produce-baseline" / "produce.logbroker.json")
    assert temporary_worktrees() == before


def test_the_load_note_warns_when_the_machine_was_busier_than_its_cores():
    assert guard.load_note(0.4, 1.6, 2) == "load average 0.4-1.6 on 2 cores"
    busy = guard.load_note(3.0, 7.2, 2)
    assert busy.startswith("load average 3.0-7.2 on 2 cores; the machine was busy")
    assert "--nice" in busy
