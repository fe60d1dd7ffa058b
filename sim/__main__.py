"""``python -m sim --seeds N [--start S]``: run N seeded schedules, print each failing seed, end with
``sim: seeds=N failed=K`` (exit 1 when K > 0). ``python -m sim --seed S``: replay one schedule and
end with ``sim: seed=S trace=<sha256 of its event trace>`` (the same on every run; exit 1 when it
fails). DESIGN §8.

``--kind cluster`` (the default) runs three real nodes under the workload, the nemesis and the
chaos checker (``sim.cluster_run``); ``--kind rpc`` the internal-RPC-and-etcd-session schedule
(``sim.run``). ``--jobs J`` runs a batch in J processes (each seed's run and hash are its own, so
the count and the failing seeds are the same as in one process)."""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from collections.abc import Callable, Iterator

from sim.cluster_run import ClusterOptions, run_cluster_seed
from sim.run import Options, Outcome, quiet, run_seed

KINDS = ("cluster", "rpc")
JOBS_MAX = 64


def _report(outcome: Outcome, *, tail: bool, replay: str) -> None:
    print(f"sim: seed={outcome.seed} FAILED trace={outcome.trace} "
          f"(replay: python -m sim --seed {outcome.seed}{replay})")
    for failure in outcome.failures:
        print(f"  {failure}")
    if tail:
        print("  last events (virtual µs, event):")
        for line in outcome.tail:
            print(f"    {line}")


def _runner(kind: str, faults_s: float | None) -> Callable[[int], Outcome]:
    if kind == "rpc":
        options = Options() if faults_s is None else Options(faults_s=faults_s)
        return lambda seed: run_seed(seed, options)
    cluster_options = ClusterOptions() if faults_s is None else ClusterOptions(faults_s=faults_s)
    return lambda seed: run_cluster_seed(seed, cluster_options)


def _one(job: tuple[str, float | None, bool, int]) -> Outcome:
    kind, faults_s, verbose, seed = job
    if not verbose:
        quiet()
    return _runner(kind, faults_s)(seed)


def _outcomes(kind: str, faults_s: float | None, verbose: bool, seeds: range, jobs: int) -> Iterator[Outcome]:
    if jobs <= 1:
        run = _runner(kind, faults_s)
        yield from (run(seed) for seed in seeds)
        return
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:  # in seed order, whatever finishes first
        yield from pool.map(_one, [(kind, faults_s, verbose, seed) for seed in seeds], chunksize=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seeds", type=int, help="how many schedules to run")
    which.add_argument("--seed", type=int, help="replay this one schedule")
    parser.add_argument("--start", type=int, default=0, help="the first seed of --seeds (0)")
    parser.add_argument("--kind", choices=KINDS, default="cluster", help="which schedule (cluster)")
    parser.add_argument("--faults-s", type=float, default=None,
                        help=f"virtual seconds under faults per schedule (cluster {ClusterOptions().faults_s:g}, "
                             f"rpc {Options().faults_s:g})")
    parser.add_argument("--jobs", type=int, default=1, help=f"processes for --seeds (1..{JOBS_MAX})")
    parser.add_argument("--verbose", action="store_true", help="print the broker's logs and failing traces")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 0:
        parser.error("--seeds must be >= 0")
    if not 1 <= args.jobs <= JOBS_MAX:
        parser.error(f"--jobs must be from 1 to {JOBS_MAX}")
    if not args.verbose:
        quiet()
    replay = ("" if args.kind == "cluster" else f" --kind {args.kind}") + \
        ("" if args.faults_s is None else f" --faults-s {args.faults_s:g}")
    if args.seed is not None:
        outcome = _runner(args.kind, args.faults_s)(args.seed)
        if not outcome.ok:
            _report(outcome, tail=True, replay=replay)
        print(f"sim: seed={args.seed} trace={outcome.trace}")
        return 0 if outcome.ok else 1
    failed = 0
    seeds = range(args.start, args.start + args.seeds)
    for outcome in _outcomes(args.kind, args.faults_s, args.verbose, seeds, args.jobs):
        if not outcome.ok:
            failed += 1
            _report(outcome, tail=args.verbose, replay=replay)
            sys.stdout.flush()
    print(f"sim: seeds={args.seeds} failed={failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
