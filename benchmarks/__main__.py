"""Entry point: ``python -m benchmarks <scenario> [<scenario> ...] [--quick] [--out DIR] [--systems ...]``.

``all`` runs the standard set (produce, consume, latency, idle, queue) against every system (LogBroker
over HTTP, LogBroker through its Kafka listener, NATS JetStream, RabbitMQ);
``replication`` puts the same producers on a replicated LogBroker cluster, a lone LogBroker node and
three-server NATS and RabbitMQ clusters; ``failover`` kills a partition's leader under a producer
on three nodes on etcd and times the failover and the failback; ``log``, ``node`` and the others
of ``LOGBROKER_ONLY`` are LogBroker's own benchmarks (``cluster``: three nodes on etcd);
``report`` rebuilds REPORT.md and the plots from the result files in ``--out``, each scenario from
its latest run; ``guard`` is the regression gate (``benchmarks.guard``): a baseline commit against
the working tree, quick scenarios interleaved and repeated, non-zero when the working tree is worse.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence

from benchmarks import (
    auth_bench,
    cluster_bench,
    compaction_bench,
    encryption_bench,
    failover_bench,
    group_scale_bench,
    groups_bench,
    grpc_bench,
    guard,
    kafka_bench,
    log_bench,
    node_bench,
    queue_bench,
    racks_bench,
    replication_bench,
    spark_bench,
)
from benchmarks.results import DEFAULT_OUT_DIR

STANDARD = ("produce", "consume", "latency", "idle", "queue")
HARNESS_SCENARIOS = ("produce", "consume", "latency", "idle", "queues")
# LogBroker's own benchmarks: (name, help, what --quick does); each writes <name>.json.
LOGBROKER_ONLY = (
    ("log", "the partition log alone against plain file I/O", "a short run"),
    ("node", "one node through HTTP with the Python client", "a short run"),
    ("spark", "Spark batch read: segment files directly against HTTP", "1 million records instead of 10 million"),
    ("auth", "produce and consume with auth on against auth off, side by side", "a short run"),
    ("encryption", "produce and consume with encryption at rest on against off (and a keyed node's plain topic), "
     "side by side", "a short run"),
    ("compaction", "a compaction pass's speed (in-process, unthrottled) and produce/end-to-end latency at "
     "5,000 records/s on a node while a pass runs against while none does", "3 repetitions, 64 MiB to compact"),
    ("groups", "consumer group consumption: 3 members over 6 partitions", "a short run"),
    ("groupscale", "group coordinator cost: 100,000 groups joined, then their sessions lapse at once",
     "20,000 groups instead of 100,000"),
    ("groupscale-auth", "groupscale with auth on: an admin's groups, then a user's under the default limits",
     "20,000 groups instead of 100,000"),
    ("queue", "queue receive + ack with 4 workers, batches of 100", "a short run"),
    ("cluster", "three nodes on etcd: forwarding through a non-leader, metadata calls against the local "
     "coordinator", "a short run"),
    ("grpc", "the public gRPC API against HTTP on one node: Publish and Subscribe throughput, publish p99",
     "a short run"),
    ("kafka", "the Kafka listener against HTTP on one node: librdkafka produce and consume against the binary "
     "HTTP path, side by side", "a short run"),
    ("racks", "nearest-replica reads: fetch latency from the leader in another rack (behind a delay) against "
     "the in-sync replica in the reader's rack; nearest-leader writes: produce latency to a leader in the "
     "producer's rack (leader_racks) against one in the other rack", "a short run"),
)


def _systems(text: str, known: Sequence[str] | None = None) -> list[str]:
    """``text``'s systems, each one of ``known`` (default: the harness's)."""
    from benchmarks.harness import SYSTEMS

    known = SYSTEMS if known is None else known
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in known]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"systems must be a comma-separated subset of {','.join(known)}")
    return names


def _scenario(text: str) -> str:
    """One more harness scenario (checked here: argparse's ``choices`` refuses an empty ``*`` list)."""
    if text not in HARNESS_SCENARIOS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(HARNESS_SCENARIOS)}")
    return text


def _ttls(text: str) -> tuple[int, ...]:
    try:
        ttls = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        ttls = ()
    if not ttls or any(t < 1000 or t % 1000 for t in ttls):
        raise argparse.ArgumentTypeError("lease TTLs are whole seconds in ms, comma-separated: 6000,2000")
    return ttls


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness import SYSTEMS

    systems_text = ",".join(SYSTEMS)
    replication_systems = functools.partial(_systems, known=replication_bench.SYSTEMS)
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description="LogBroker benchmarks")
    sub = parser.add_subparsers(dest="scenario", required=True)
    for name, text in (("all", "the standard set: every scenario below against every system"),
                       ("produce", "produce throughput, 100 B and 1 KiB"),
                       ("consume", "consume throughput from the start of a full log"),
                       ("latency", "end-to-end latency p50/p99/p99.9 at 1k, 5k and 20k records/s"),
                       ("idle", "produce while many idle consumers wait; their memory on a fresh server"),
                       ("queues", "queue receive+ack throughput (queue: LogBroker alone)")):
        p = sub.add_parser(name, help=text)
        if name != "all":  # several scenarios in one run: one set of servers, ratios within that run
            p.add_argument("more", nargs="*", type=_scenario, metavar="SCENARIO",
                           help=f"more scenarios in the same run, of {', '.join(HARNESS_SCENARIOS)}")
        p.add_argument("--quick", action="store_true", help="a short run (all: under two minutes)")
        p.add_argument("--out", default=DEFAULT_OUT_DIR, help="directory for results, REPORT.md and plots")
        p.add_argument("--systems", type=_systems, default=systems_text, help=f"comma-separated: {systems_text}")
        p.add_argument("--work-dir", default=None, help="where servers keep their data (default: the temp dir)")
        p.add_argument("--profile", default=None, metavar="DIR",
                       help="record py-spy profiles of the LogBroker node and the clients into DIR")
    repl = sub.add_parser("replication", help="produce with replication factor 2 and 3 (acks=all) on three "
                          "LogBroker nodes against one node (acks=1), and on 3-server NATS and RabbitMQ clusters")
    repl.add_argument("--quick", action="store_true", help="a short run (under three minutes)")
    repl.add_argument("--out", default=DEFAULT_OUT_DIR, help="directory for results, REPORT.md and plots")
    repl.add_argument("--systems", type=replication_systems, default=",".join(replication_bench.SYSTEMS),
                      help=f"comma-separated: {','.join(replication_bench.SYSTEMS)}")
    repl.add_argument("--work-dir", default=None, help="where the servers keep their data (default: the temp dir "
                      "for the peers, the current directory for LogBroker)")
    fail = sub.add_parser("failover", help="kill -9 a partition's leader under an acks=all producer on three nodes "
                          "on etcd: the failover time and the failback of the restarted node, with the default lease "
                          "TTL and a shorter one")
    fail.add_argument("--quick", action="store_true", help="3 repetitions, short steady phases (about 2 minutes)")
    fail.add_argument("--out", default=DEFAULT_OUT_DIR, help="directory for results, REPORT.md and plots")
    fail.add_argument("--work-dir", default=None, help="where etcd and the nodes keep their data (default: cwd)")
    fail.add_argument("--ttls-ms", type=_ttls, default=None, help="comma-separated lease TTLs, one cluster each "
                      "(default: 6000,2000)")
    fail.add_argument("--pace-ms", type=float, default=None, help="between two produce calls (default 20; 0: back "
                      "to back)")
    rep = sub.add_parser("report", help="rebuild REPORT.md and plots from each scenario's latest run")
    rep.add_argument("--out", default=DEFAULT_OUT_DIR)
    gate = sub.add_parser("guard", help="the regression gate: a baseline commit (default main) against the working "
                          "tree, the quick scenarios interleaved and repeated; exits 1 when the working tree is worse "
                          "beyond the measured noise")
    guard.add_arguments(gate)
    for name, help_text, quick_text in LOGBROKER_ONLY:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--quick", action="store_true", help=quick_text)
        p.add_argument("--out", default=None, help=f"directory for {name}.json (default benchmarks/results)")
        p.add_argument("--work-dir", default=None, help="where the node keeps its data (default: cwd)")
        if name == "cluster":
            p.add_argument("--profile", default=None, metavar="DIR",
                           help="record py-spy profiles of the three nodes during the forwarding part into DIR")
    args = parser.parse_args(argv)
    runners: dict[str, Callable[..., object]] = {
        "log": log_bench.run, "node": node_bench.run, "spark": spark_bench.run, "auth": auth_bench.run,
        "encryption": encryption_bench.run, "compaction": compaction_bench.run,
        "groups": groups_bench.run, "groupscale": group_scale_bench.run,
        "groupscale-auth": functools.partial(group_scale_bench.run, auth=True), "queue": queue_bench.run,
        "grpc": grpc_bench.run, "racks": racks_bench.run, "kafka": kafka_bench.run}
    if args.scenario == "replication":
        systems = args.systems if isinstance(args.systems, list) else replication_systems(args.systems)
        documents = replication_bench.run(
            quick=args.quick, out_dir=args.out, work_dir=args.work_dir, systems=systems,
            command="python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv))
        return 1 if replication_bench.failed(documents) else 0
    if args.scenario == "guard":
        return guard.main(args)
    if args.scenario == "failover":
        command = "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
        failover_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir, ttls_ms=args.ttls_ms,
                           pace_ms=args.pace_ms, command=command)
        return 0
    if args.scenario == "cluster":
        cluster_bench.run(quick=args.quick, out_dir=args.out, work_dir=args.work_dir, profile_dir=args.profile)
    elif args.scenario in runners:
        runners[args.scenario](quick=args.quick, out_dir=args.out, work_dir=args.work_dir)
    elif args.scenario == "report":
        return _report(args.out)
    else:
        from benchmarks import harness, plan

        systems = args.systems if isinstance(args.systems, list) else _systems(args.systems)
        # "queues" is the peer comparison of the harness's "queue" scenario ("queue" alone is
        # LogBroker's own queue benchmark).
        asked = [args.scenario, *getattr(args, "more", ())]
        scenarios = STANDARD if args.scenario == "all" else \
            tuple(dict.fromkeys("queue" if s == "queues" else s for s in asked))
        command = "make bench" + (" QUICK=1" if args.quick else "") if args.scenario == "all" else \
            "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
        harness.run(scenarios, systems, plan.QUICK if args.quick else plan.FULL, quick=args.quick,
                    out_dir=args.out, work_dir=args.work_dir, command=command, profile_dir=args.profile)
    return 0


def _report(out_dir: str) -> int:
    from benchmarks import harness
    from benchmarks.results import read_latest

    documents = read_latest(out_dir)
    if not documents:
        print(f"no result files of a harness run in {out_dir}", file=sys.stderr)
        return 1
    harness.write_run(documents, out_dir, rates=[1000, 5000, 20_000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
