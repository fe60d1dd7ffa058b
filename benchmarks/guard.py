"""``python -m benchmarks guard``: the regression gate (decision 0255). It measures a baseline (by
default ``main``'s tip) and a candidate (by default this working tree, uncommitted changes
included) with the same quick scenarios, in one run, interleaved, repeated, and exits non-zero
when the candidate is worse than the baseline beyond the noise the run itself measured.

Each side is a tree of its own: a commit is checked out in a temporary git worktree (detached,
named ``bench-guard-<side>-<commit>``, under a temporary directory; removed on the way out, on
an error, Ctrl-C or SIGTERM too), and every run is ``python -m benchmarks <command> --quick ...``
with ``PYTHONPATH`` set to that tree, so a side runs its own harness and its own node: a change
to the harness is measured as it was then. A scenario a side's harness does not have (an older
commit) is skipped, and the table says so.

The order: repetitions outermost; in each, every scenario, the two sides of a scenario back to
back (a pair), the side that goes first alternating. The statistics (``benchmarks.guard_verdict``):
per figure, the ratio candidate / baseline of each pair; the median ratio, its min-max and an
order-statistic interval of at least 90 % for that median; a figure fails when its median is
worse than its tolerance (10 % for throughput, 25 % for p50/p99, 50 % for p99.9) and the whole
interval is on the worse side of 1. A latency figure of one run is what that run's harness
reports: the median over its own repetitions of each repetition's percentile, so one burst in
one repetition moves it less than a pooled percentile would.

Writes ``guard.json`` (every run's figures, the rows, the verdict) and each run's result file and
log under ``--out`` (default: a new temporary directory, kept and named at the end); never into
``benchmarks/results``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any, Final

from benchmarks.guard_scenarios import (
    DEFAULT_SCENARIOS,
    SCENARIOS,
    SIDES,
    Scenario,
    Side,
    missing_flags,
    parse_scenarios,
    schedule,
)
from benchmarks.guard_table import render
from benchmarks.guard_verdict import MIN_PAIRS, Row, error, failed, judge, skipped

ROOT: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the tree this guard runs from
TEMP_PREFIX: Final = "logbroker-bench-guard-"
WORKTREE_PREFIX: Final = "bench-guard-"
JAR: Final = os.path.join("spark_connector", "jvm", "build", "logbroker-spark-segments.jar")
BUILD_JAR: Final = os.path.join("scripts", "build-jvm.sh")
DEFAULT_REPEAT: Final = 8              # 8 pairs: the interval drops the most extreme pair on each side
GIT_TIMEOUT_S: Final = 120.0
PROBE_TIMEOUT_S: Final = 120.0
BUILD_TIMEOUT_S: Final = 600.0
STOP_GRACE_S: Final = 60.0            # a run interrupted gets this long to stop its servers
LOG_TAIL_LINES: Final = 15


class GuardError(RuntimeError):
    """The gate could not be set up (an unknown ref, a tree that does not import as itself)."""


@dataclasses.dataclass(frozen=True)
class Tree:
    side: Side
    path: str
    commit: str
    description: str


@dataclasses.dataclass
class RunOutcome:
    """One run of one side of one pair."""

    seconds: float
    figures: dict[str, float] | None = None
    error: str | None = None
    log: str = ""
    load: float = 0.0               # the machine's 1-minute load average as the run ended


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", default="main", metavar="REF",
                        help="the commit to compare against (default: main, the last landed main)")
    parser.add_argument("--candidate", default=None, metavar="REF",
                        help="measure this commit instead of the working tree (uncommitted changes included)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                        help=f"pairs of runs per scenario (default {DEFAULT_REPEAT}; at least {MIN_PAIRS} "
                        "for a verdict)")
    parser.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                        help=f"comma-separated subset of {','.join(SCENARIOS)} (default: all)")
    parser.add_argument("--out", default=None,
                        help="directory for guard.json and every run's results (default: a new temp dir)")
    parser.add_argument("--nice", type=int, default=0,
                        help="run both sides at this niceness (e.g. -10, as root, on a machine busy with other "
                        "work; default 0: the gate's own)")


# ---- git and the trees ----------------------------------------------------------------------

def git(*args: str, cwd: str = ROOT) -> str:
    done = subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    if done.returncode != 0:
        raise GuardError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def resolve(ref: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GuardError:
        raise GuardError(f"{ref!r} is not a commit of {ROOT}") from None


def describe(commit: str) -> str:
    return git("log", "-1", "--format=%h %s", commit)[:100]


def working_tree() -> Tree:
    commit = resolve("HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    note = " with uncommitted changes" if dirty else ""
    return Tree("candidate", ROOT, commit, f"working tree {ROOT} at {describe(commit)}{note}")


@contextlib.contextmanager
def checked_out(refs: dict[Side, str], scratch: str) -> Iterator[dict[Side, Tree]]:
    """A detached temporary worktree per ref, removed on the way out, however it is left."""
    created: list[str] = []
    try:
        trees = {}
        for side, ref in refs.items():
            commit = resolve(ref)
            path = os.path.join(scratch, f"{WORKTREE_PREFIX}{side}-{commit[:9]}")
            git("worktree", "add", "--detach", "--quiet", path, commit)
            created.append(path)
            trees[side] = Tree(side, path, commit, f"{ref} = {describe(commit)}")
        yield trees
    finally:
        for path in created:     # only the gate's own worktrees; others' entries are not touched
            done = subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", path], capture_output=True,
                                  text=True, timeout=GIT_TIMEOUT_S)
            if done.returncode != 0:
                say(f"could not remove the worktree {path}: {done.stderr.strip()}")
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGHUP end the gate the way Ctrl-C does, through every ``finally`` (the
    temporary worktrees are removed, a run in progress is stopped)."""
    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# ---- one side's runs ------------------------------------------------------------------------

def side_env(tree: Tree) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": tree.path}


def check_imports(tree: Tree) -> None:
    """The side's packages must load from its own tree (not from an installed copy)."""
    code = "import benchmarks, logbroker, segments; print(benchmarks.__file__, logbroker.__file__, segments.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree.path, env=side_env(tree), capture_output=True,
                          text=True, timeout=PROBE_TIMEOUT_S)
    files = done.stdout.split()
    inside = os.path.realpath(tree.path) + os.sep
    if done.returncode != 0 or len(files) != 3 or not all(os.path.realpath(f).startswith(inside) for f in files):
        raise GuardError(f"{tree.side} ({tree.description}) does not import from {tree.path}: "
                         f"{done.stdout.strip()} {done.stderr.strip()[-500:]}")


def unavailable(tree: Tree, scenario: Scenario) -> str | None:
    """Why ``tree`` cannot run ``scenario`` (its harness lacks the command or a flag, or the JVM
    reader does not build there), or None when it can."""
    command = scenario.argv[0]
    done = subprocess.run([sys.executable, "-m", "benchmarks", command, "--help"], cwd=tree.path,
                          env=side_env(tree), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    if done.returncode != 0:
        return f"{tree.side} {tree.commit[:9]} has no `{command}` benchmark"
    missing = missing_flags(scenario, done.stdout)
    if missing:
        return f"{tree.side} {tree.commit[:9]}: `{command}` has no {', '.join(missing)}"
    if scenario.needs_jar and not os.path.exists(os.path.join(tree.path, JAR)):
        return build_jar(tree)
    return None


def build_jar(tree: Tree) -> str | None:
    """Build the JVM segment reader in ``tree`` with that tree's own script; why not, or None."""
    if not os.path.exists(os.path.join(tree.path, BUILD_JAR)):
        return f"{tree.side} {tree.commit[:9]} has no {BUILD_JAR}"
    say(f"{tree.side}: building the JVM segment reader")
    done = subprocess.run([os.path.join(tree.path, BUILD_JAR), sys.executable, JAR], cwd=tree.path,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        return f"{tree.side} {tree.commit[:9]}: the JVM reader did not build: {done.stderr.strip()[-300:]}"
    return None


def run_once(tree: Tree, scenario: Scenario, run_dir: str, scratch: str, nice: int = 0) -> RunOutcome:
    """One quick run of ``scenario`` in ``tree``'s own code; its result file and log in ``run_dir``.
    The run gets a process group of its own, so that an interrupted run is stopped as a whole:
    SIGINT first (the harness stops its servers), SIGKILL to the group after ``STOP_GRACE_S``."""
    os.makedirs(run_dir, exist_ok=True)
    log_path = os.path.join(run_dir, "run.log")
    work = tempfile.mkdtemp(prefix="run-", dir=scratch)       # servers that keep data in the cwd keep it here
    argv = [*(["nice", "-n", str(nice)] if nice else []), sys.executable, "-m", "benchmarks", *scenario.argv,
            "--out", run_dir]
    started = time.monotonic()
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(argv, cwd=work, env=side_env(tree), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, process_group=0)
            try:
                code: int | None = proc.wait(timeout=scenario.timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                if proc.poll() is None:
                    stop_group(proc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - started
    load = os.getloadavg()[0]
    if code != 0:
        why = f"timed out after {scenario.timeout_s:.0f} s" if code is None else f"exit status {code}"
        return RunOutcome(seconds, error=f"{why}; log: {log_path}\n{tail(log_path)}", log=log_path, load=load)
    try:
        with open(os.path.join(run_dir, scenario.result_file), encoding="utf-8") as f:
            document = json.load(f)
        figures = {k: float(v) for k, v in document["figures"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        return RunOutcome(seconds, error=f"no readable {scenario.result_file}: {e}; log: {log_path}", log=log_path,
                          load=load)
    return RunOutcome(seconds, figures=figures, log=log_path, load=load)


def stop_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def load_note(low: float, high: float, cpus: int) -> str:
    """The machine's load over the runs, and a warning when other work could hide a difference."""
    note = f"load average {low:.1f}-{high:.1f} on {cpus} cores"
    if high > cpus:
        note += ("; the machine was busy with other work: a regression can hide in its noise (an 'ok' row is "
                 "weaker evidence; see --nice)")
    return note


def tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-LOG_TAIL_LINES:])
    except OSError:
        return ""


def say(text: str) -> None:
    print(f"[guard] {text}", file=sys.stderr, flush=True)


# ---- from runs to rows (pure) ---------------------------------------------------------------

def rows_for(scenario: Scenario, reason: str | None, runs: dict[Side, list[RunOutcome | None]]) -> list[Row]:
    """The rows of one scenario: skipped (with ``reason``) when a side cannot run it; an error
    when the candidate failed a pair whose baseline run succeeded; else judged pair by pair."""
    if reason is not None:
        return [skipped(f, reason) for f in scenario.figures]
    base, cand = runs["baseline"], runs["candidate"]
    broken = [i + 1 for i, (b, c) in enumerate(zip(base, cand, strict=True))
              if c is not None and c.error is not None and b is not None and b.error is None]
    rows = []
    for figure in scenario.figures:
        if broken:
            rows.append(error(figure, f"the candidate's run failed in pair {', '.join(map(str, broken))}"))
            continue
        b_values = [r.figures.get(figure.name) if r is not None and r.figures else None for r in base]
        c_values = [r.figures.get(figure.name) if r is not None and r.figures else None for r in cand]
        ran = [r for r in base if r is not None and r.figures is not None]
        if ran and all(v is None for v in b_values):
            rows.append(skipped(figure, f"the baseline's {scenario.result_file} has no {figure.name}"))
        elif any(r is not None and r.figures is not None for r in cand) and all(v is None for v in c_values):
            rows.append(error(figure, f"the candidate's {scenario.result_file} has no {figure.name}"))
        else:
            rows.append(judge(figure, b_values, c_values))
    return rows


def row_document(row: Row) -> dict[str, Any]:
    return {"scenario": row.figure.scenario, "figure": row.figure.name, "label": row.figure.label,
            "unit": row.figure.unit, "higher_is_better": row.figure.higher_is_better,
            "tolerance": row.figure.tolerance, "verdict": row.verdict, "pairs": row.pairs,
            "baseline_median": row.baseline, "candidate_median": row.candidate, "ratio_median": row.ratio,
            "ratio_min": row.ratio_min, "ratio_max": row.ratio_max,
            "ratio_interval": list(row.interval) if row.interval else None, "note": row.note}


# ---- the gate -------------------------------------------------------------------------------

def measure(trees: dict[Side, Tree], scenarios: Sequence[str], repeat: int, out_dir: str, scratch: str,
            nice: int = 0) -> tuple[dict[str, str | None], dict[str, dict[Side, list[RunOutcome | None]]]]:
    for tree in trees.values():
        check_imports(tree)
    reasons: dict[str, str | None] = {}
    for name in scenarios:
        why = [r for r in (unavailable(trees[side], SCENARIOS[name]) for side in SIDES) if r]
        reasons[name] = "; ".join(why) if why else None
        if why:
            say(f"{name}: skipped: {reasons[name]}")
    runnable = [n for n in scenarios if reasons[n] is None]
    runs: dict[str, dict[Side, list[RunOutcome | None]]] = {
        n: {side: [None] * repeat for side in SIDES} for n in scenarios}
    steps = schedule(runnable, repeat)
    for number, step in enumerate(steps, 1):
        for side in step.sides:
            run_dir = os.path.join(out_dir, "runs", f"pair{step.rep + 1}-{step.scenario}-{side}")
            outcome = run_once(trees[side], SCENARIOS[step.scenario], run_dir, scratch, nice)
            runs[step.scenario][side][step.rep] = outcome
            status = "ok" if outcome.error is None else f"FAILED ({outcome.error.splitlines()[0]})"
            say(f"{number}/{len(steps)} pair {step.rep + 1}/{repeat} {step.scenario} {side}: "
                f"{outcome.seconds:.0f} s, load average {outcome.load:.1f}, {status}")
    return reasons, runs


def guard(*, baseline: str, candidate: str | None, scenarios: Sequence[str], repeat: int,
          out_dir: str | None, nice: int = 0) -> int:
    out = out_dir or tempfile.mkdtemp(prefix=TEMP_PREFIX + "out-")
    os.makedirs(out, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC)
    scratch = tempfile.mkdtemp(prefix=TEMP_PREFIX)
    try:
        with interruptible():
            refs: dict[Side, str] = {"baseline": baseline, **({"candidate": candidate} if candidate else {})}
            with checked_out(refs, scratch) as trees:
                if candidate is None:
                    trees["candidate"] = working_tree()
                title = [f"baseline:  {trees['baseline'].description}",
                         f"candidate: {trees['candidate'].description}",
                         f"{repeat} interleaved pairs per scenario ({', '.join(scenarios)})"
                         + (f", runs at niceness {nice}" if nice else "") + f"; runs in {out}"]
                for line in title:
                    say(line)
                reasons, runs = measure(trees, scenarios, repeat, out, scratch, nice)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows = [row for name in scenarios for row in rows_for(SCENARIOS[name], reasons[name], runs[name])]
    verdict = "fail" if failed(rows) else "pass"
    loads = [r.load for n in scenarios for side in SIDES for r in runs[n][side] if r is not None]
    if loads:
        title.append(load_note(min(loads), max(loads), os.cpu_count() or 1))
    table = render(rows, title)
    print(table)
    print(f"verdict: {verdict.upper()}")
    document = {"started_at": started.isoformat(timespec="seconds"), "verdict": verdict, "repeat": repeat,
                "nice": nice, "scenarios": list(scenarios),
                "sides": {side: dataclasses.asdict(tree) for side, tree in trees.items()},
                "skipped": {n: r for n, r in reasons.items() if r},
                "runs": [{"pair": i + 1, "scenario": n, "side": side, **dataclasses.asdict(r)}
                         for n in scenarios for side in SIDES for i, r in enumerate(runs[n][side]) if r],
                "rows": [row_document(row) for row in rows], "table": table}
    path = os.path.join(out, "guard.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    say(f"wrote {path}")
    return 1 if verdict == "fail" else 0


def main(args: argparse.Namespace) -> int:
    try:
        scenarios = parse_scenarios(args.scenarios)
        if args.repeat < 1:
            raise ValueError(f"--repeat must be at least 1, got {args.repeat}")
        return guard(baseline=args.baseline, candidate=args.candidate, scenarios=scenarios, repeat=args.repeat,
                     out_dir=args.out, nice=args.nice)
    except (GuardError, ValueError) as e:
        print(f"guard: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("guard: interrupted; the temporary worktrees are removed", file=sys.stderr)
        return 130
