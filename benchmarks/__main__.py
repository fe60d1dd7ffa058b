"""Entry point: ``python -m benchmarks <scenario> [--quick] [--out DIR]``."""

from __future__ import annotations

import argparse
import sys

from benchmarks import auth_bench, groups_bench, log_bench, node_bench, queue_bench, spark_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description="LogBroker benchmarks")
    sub = parser.add_subparsers(dest="scenario", required=True)
    log = sub.add_parser("log", help="the partition log alone against plain file I/O")
    log.add_argument("--quick", action="store_true", help="a short run (under 30 s)")
    log.add_argument("--out", default=None, help="directory for log.json (default benchmarks/results)")
    log.add_argument("--work-dir", default=None, help="where to write the test files (default: cwd)")
    node = sub.add_parser("node", help="one node through HTTP with the Python client")
    node.add_argument("--quick", action="store_true", help="a short run")
    node.add_argument("--out", default=None, help="directory for node.json (default benchmarks/results)")
    node.add_argument("--work-dir", default=None, help="where the node keeps its data (default: cwd)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
