"""``python -m chaos --duration 10m [--out DIR] [--seed N] [--no-network] [--encryption]``: one chaos run; writes
``history.jsonl``, ``summary.json`` and ``chaos.png`` under ``--out`` and prints the summary. Exits
1 when the checker found an anomaly."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile

from chaos.run import Options, format_summary, run, write_results


def duration(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)?", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 10m)")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2) or "s"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--duration", type=duration, default=duration("10m"), help="time under faults (10m)")
    parser.add_argument("--out", default=os.path.join("chaos", "results"), help="results directory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=40.0, help="records/s per producer")
    parser.add_argument("--no-network", action="store_true", help="no namespaces, no partition faults")
    parser.add_argument("--encryption", action="store_true", help="every node with one key ring: records "
                        "encrypted at rest, replicated as ciphertext")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chaos-") as root:
        outcome = run(Options(root=root, duration_s=args.duration, seed=args.seed, producers=args.producers,
                              rate=args.rate, network=not args.no_network, encryption=args.encryption))
        os.makedirs(args.out, exist_ok=True)
        logs = os.path.join(args.out, "logs")
        os.makedirs(logs, exist_ok=True)
        for name in os.listdir(outcome.summary["node_logs"]):
            with open(os.path.join(outcome.summary["node_logs"], name), "rb") as src, \
                    open(os.path.join(logs, name), "wb") as dst:
                dst.write(src.read())
        outcome.summary["node_logs"] = logs
        paths = write_results(outcome, args.out)
    print(format_summary(outcome.summary))
    print(f"results: {', '.join(paths.values())}")
    return 0 if outcome.result.valid else 1


if __name__ == "__main__":
    sys.exit(main())
