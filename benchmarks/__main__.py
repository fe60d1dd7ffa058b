"""Entry point: ``python -m benchmarks <scenario> [--quick] [--out DIR] [--systems ...]``.

``all`` runs the standard set (produce, consume, latency, idle, queue) against every system;
``log`` and ``node`` are LogBroker's own micro-benchmarks; ``report`` rebuilds REPORT.md and the
plots from the result files of the latest run in ``--out``.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import auth_bench, groups_bench, log_bench, node_bench, queue_bench, spark_bench
from benchmarks.results import DEFAULT_OUT_DIR

STANDARD = ("produce", "consume", "latency", "idle", "queue")


def _systems(text: str) -> list[str]:
    from benchmarks.harness import SYSTEMS

    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SYSTEMS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"systems must be a comma-separated subset of {','.join(SYSTEMS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description="LogBroker benchmarks")
    sub = parser.add_subparsers(dest="scenario", required=True)
    for name, text in (("all", "the standard set: every scenario below against every system"),
                       ("produce", "produce throughput, 100 B and 1 KiB"),
                       ("consume", "consume throughput from the start of a full log"),
                       ("latency", "end-to-end latency p50/p99/p99.9 at 1k, 5k and 20k records/s"),
                       ("idle", "produce while many idle long-poll consumers wait"),
                       ("queues", "queue receive+ack throughput (queue: LogBroker alone)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--quick", action="store_true", help="a short run (all: under two minutes)")
        p.add_argument("--out", default=DEFAULT_OUT_DIR, help="directory for results, REPORT.md and plots")
        p.add_argument("--systems", type=_systems, default="logbroker,nats,rabbitmq",
                       help="comma-separated: logbroker,nats,rabbitmq")
        p.add_argument("--work-dir", default=None, help="where servers keep their data (default: the temp dir)")
        p.add_argument("--profile", default=None, metavar="DIR",
                       help="record py-spy profiles of the LogBroker node and the clients into DIR")
    rep = sub.add_parser("report", help="rebuild REPORT.md and plots from the latest run's result files")
    rep.add_argument("--out", default=DEFAULT_OUT_DIR)
    for name, text in (("log", "the partition log alone against plain file I/O"),
                       ("node", "one node through HTTP with the Python client")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--quick", action="store_true", help="a short run")
        p.add_argument("--out", default=None, help=f"directory for {name}.json (default benchmarks/results)")
        p.add_argument("--work-dir", default=None, help="where to write data (default: cwd)")
    spark = sub.add_parser("spark", help="Spark batch read: segment files directly against HTTP")
    spark.add_argument("--quick", action="store_true", help="1 million records instead of 10 million")
    spark.add_argument("--out", default=None, help="directory for spark.json (default benchmarks/results)")
    spark.add_argument("--work-dir", default=None, help="where the node keeps its data (default: a temp dir)")
    auth = sub.add_parser("auth", help="produce and consume with auth on against auth off, side by side")
    auth.add_argument("--quick", action="store_true", help="a short run")
    auth.add_argument("--out", default=None, help="directory for auth.json (default benchmarks/results)")
    auth.add_argument("--work-dir", default=None, help="where the nodes keep their data (default: cwd)")
    for name, help_text in (("groups", "consumer group consumption: 3 members over 6 partitions"),
                            ("queue", "queue receive + ack with 4 workers, batches of 100")):
        scenario = sub.add_parser(name, help=help_text)
        scenario.add_argument("--quick", action="store_true", help="a short run")
        scenario.add_argument("--out", default=None, help=f"directory for {name}.json (default benchmarks/results)")
        scenario.add_argument("--work-dir", default=None, help="where the node keeps its data (default: cwd)")
    args = parser.parse_args(argv)
    if args.scenario == "log":
        log_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "node":
        node_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "spark":
        spark_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "auth":
        auth_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "groups":
        groups_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "queue":
        queue_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "report":
        return _report(args.out)
    else:
        from benchmarks import harness, plan

        systems = args.systems if isinstance(args.systems, list) else _systems(args.systems)
        # "queues" is the peer comparison of the harness's "queue" scenario ("queue" alone is
        # LogBroker's own queue benchmark).
        scenarios = STANDARD if args.scenario == "all" else ("queue" if args.scenario == "queues" else args.scenario,)
        command = "make bench" + (" QUICK=1" if args.quick else "") if args.scenario == "all" else \
            "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
        harness.run(scenarios, systems, plan.QUICK if args.quick else plan.FULL, quick=args.quick,
                    out_dir=args.out, work_dir=args.work_dir, command=command, profile_dir=args.profile)
    return 0


def _report(out_dir: str) -> int:
    from benchmarks import harness
    from benchmarks.results import read_run

    documents = read_run(out_dir)
    if not documents:
        print(f"no result files of a harness run in {out_dir}", file=sys.stderr)
        return 1
    rates = sorted({int(r) for d in documents for r in d["params"].get("rates_per_s", [])})
    harness.write_run(documents, out_dir, rates=rates or [1000, 5000, 20_000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
