"""``python -m sim --seeds N [--start S]``: run N seeded schedules, print each failing seed, end with
``sim: seeds=N failed=K`` (exit 1 when K > 0). ``python -m sim --seed S``: replay one schedule and
end with ``sim: seed=S trace=<sha256 of its event trace>`` (the same on every run; exit 1 when it
fails). DESIGN §8."""

from __future__ import annotations

import argparse
import sys

from sim.run import Options, Outcome, quiet, run_seed


def _report(outcome: Outcome, *, tail: bool) -> None:
    print(f"sim: seed={outcome.seed} FAILED trace={outcome.trace} (replay: python -m sim --seed {outcome.seed})")
    for failure in outcome.failures:
        print(f"  {failure}")
    if tail:
        print("  last events (virtual µs, event):")
        for line in outcome.tail:
            print(f"    {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seeds", type=int, help="how many schedules to run")
    which.add_argument("--seed", type=int, help="replay this one schedule")
    parser.add_argument("--start", type=int, default=0, help="the first seed of --seeds (0)")
    parser.add_argument("--faults-s", type=float, default=Options().faults_s,
                        help="virtual seconds under faults per schedule")
    parser.add_argument("--verbose", action="store_true", help="print the broker's logs and failing traces")
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 0:
        parser.error("--seeds must be >= 0")
    if not args.verbose:
        quiet()
    options = Options(faults_s=args.faults_s)
    if args.seed is not None:
        outcome = run_seed(args.seed, options)
        if not outcome.ok:
            _report(outcome, tail=True)
        print(f"sim: seed={args.seed} trace={outcome.trace}")
        return 0 if outcome.ok else 1
    failed = 0
    for seed in range(args.start, args.start + args.seeds):
        outcome = run_seed(seed, options)
        if not outcome.ok:
            failed += 1
            _report(outcome, tail=args.verbose)
            sys.stdout.flush()
    print(f"sim: seeds={args.seeds} failed={failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
