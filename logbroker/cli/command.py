"""The ``logbroker`` command: ``serve``, ``topic create|list|describe|alter|delete``, ``produce``,
``consume``, ``group list|describe|reset-offsets`` and ``queue send|receive`` (``groups``),
(``admin``) ``token``, ``user``, ``acl`` and ``certs``, and ``keys`` (encryption at rest). Human
output by default, ``--json`` for scripts. This module is the composition entry point, so ``serve`` is the one place in
``logbroker`` that imports the HTTP layer.

The client commands run on the base install (the client alone, decision 0279): ``serve``,
``certs`` and ``keys reencrypt`` import the server's dependencies only when they run, and say
which extra to install when those are missing."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from collections.abc import Coroutine
from typing import Any, Final

from logbroker import config_docs
from logbroker.cli import admin, dev_cluster, groups, keys
from logbroker.client import (
    CA_FILE_ENV,
    CERT_FILE_ENV,
    DEFAULT_URL,
    KEY_FILE_ENV,
    PASSWORD_ENV,
    TOKEN_ENV,
    USER_ENV,
    Client,
    Consumer,
    ConsumerRecord,
    LogBrokerError,
    Producer,
)
from logbroker.config import ENV_ONLY, field_names, resolve
from logbroker.errors import InvalidRequestError

URL_ENV: Final = "LOGBROKER_URL"
LIST_CONFIG_KEYS: Final = frozenset({"leader_racks"})  # config keys whose value is a list of names
SERVER_EXTRA_HINT: Final = "pip install 'logbroker[server]' (from a checkout: pip install -e '.[server]')"
# The project's own packages: one of them missing is a broken install, not a missing extra.
PROJECT_PACKAGES: Final = ("segments", "coordinator", "internal_rpc", "http_api", "grpc_api", "logbroker",
                           "spark_connector")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logbroker", description="LogBroker: a Kafka-style log broker")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a node", description="Run a node. Every flag is also an "
                           "environment variable LOGBROKER_<NAME> and a key of the --config TOML file "
                           "(flag > env > file > default).")
    serve.add_argument("--config", help="TOML file with any of the keys below")
    for name in field_names():
        if name in ENV_ONLY:
            continue
        serve.add_argument("--" + name.replace("_", "-"), dest=name, default=None,
                           help=f"{config_docs.meaning(name)} (default: {config_docs.default_text(name)})")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get(URL_ENV, DEFAULT_URL),
                        help=f"node URL, or several separated by commas (env {URL_ENV}, default {DEFAULT_URL})")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--user", default=None, help=f"user name (env {USER_ENV}); with --password")
    common.add_argument("--password", default=None, help=f"password (env {PASSWORD_ENV})")
    common.add_argument("--token", default=None, help=f"a bearer token instead of a password (env {TOKEN_ENV})")
    common.add_argument("--ca-file", default=None, help=f"CA certificate for HTTPS (env {CA_FILE_ENV})")
    common.add_argument("--cert-file", default=None,
                        help=f"client certificate, where nodes require one (env {CERT_FILE_ENV})")
    common.add_argument("--key-file", default=None, help=f"its private key (env {KEY_FILE_ENV})")

    def client_command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[common])

    topic = sub.add_parser("topic", help="manage topics and queues", description="manage topics and queues")
    actions = topic.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a topic or queue", parents=[common])
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=None)
    create.add_argument("--kind", choices=("topic", "queue"), default="topic")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    actions.add_parser("list", help="list topics", parents=[common])
    for action in ("describe", "delete"):
        actions.add_parser(action, help=f"{action} a topic", parents=[common]).add_argument("name")
    alter = actions.add_parser("alter", help="change the config of a live topic or queue (owner or admin)",
                               description="change the config of a live topic or queue (owner or admin); "
                               "KEY= puts a key back to its default", parents=[common])
    alter.add_argument("name")
    alter.add_argument("changes", nargs="+", metavar="KEY=VALUE")

    produce = client_command("produce", "produce lines from stdin (key<TAB>value when a line has a tab)")
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int, default=None)
    produce.add_argument("--acks", choices=("0", "1", "all"), default="1")
    produce.add_argument("--no-keys", action="store_true", help="never split lines into key and value")

    consume = client_command("consume", "print records of a topic")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, action="append", help="repeatable; default: all partitions")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--offset", type=int, help="start at this offset (in each partition)")
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    consume.add_argument("--follow", action="store_true", help="keep waiting for new records")
    consume.add_argument("--max-records", type=int, default=None, help="stop after this many")
    consume.add_argument("--print-key", action="store_true", help="print key<TAB>value")
    cluster = sub.add_parser("cluster", help="the cluster as its coordinator sees it", description="the cluster")
    cluster_actions = cluster.add_subparsers(dest="action", required=True)
    cluster_actions.add_parser("status", help="nodes, liveness, and leaders and replicas per node", parents=[common])
    cluster_actions.add_parser("rebalance", help="spread partitions evenly over the live nodes (admin)",
                               parents=[common])
    leave = cluster_actions.add_parser("decommission", help="move every partition off a node (admin)",
                                       parents=[common])
    leave.add_argument("node_id", type=int)
    groups.add_commands(sub, common)
    admin.add_commands(sub, common)
    dev_cluster.add_commands(sub)
    keys.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command in ("serve", "certs") or (args.command == "keys" and args.action == "reencrypt"):
            return _server_command(args)
        if args.command == "keys":
            return keys.run(args)
        if args.command == "dev-cluster":
            return dev_cluster.run(args)
        return _run(_client_main(args))
    except (LogBrokerError, InvalidRequestError) as exc:
        print(f"logbroker: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _run(main: Coroutine[Any, Any, int]) -> int:
    """On uvloop where the server extra installed it; the client needs nothing beyond asyncio."""
    try:
        import uvloop
    except ModuleNotFoundError:
        return asyncio.run(main)
    return uvloop.run(main)


def _server_command(args: argparse.Namespace) -> int:
    try:
        if args.command == "keys":
            return keys.run(args)
        return _serve(args) if args.command == "serve" else admin.certs(args)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in PROJECT_PACKAGES:
            raise
        print(f"logbroker: `{args.command}` needs the server's dependencies, which this install does not have "
              f"(no module named {exc.name!r}): {SERVER_EXTRA_HINT}", file=sys.stderr)
        return 1


def _serve(args: argparse.Namespace) -> int:
    import uvloop

    from coordinator.errors import CoordinatorUnavailableError
    from http_api.server import serve
    from logbroker import logs
    from logbroker.data_dir_lock import DataDirInUseError

    flags = {name: getattr(args, name) for name in field_names() if name not in ENV_ONLY}
    try:
        config = resolve(flags, os.environ, args.config)
        logs.configure(config.log_level)
        uvloop.run(serve(config))
    except (InvalidRequestError, DataDirInUseError) as exc:
        print(f"logbroker: {exc}", file=sys.stderr)
        return 2
    except CoordinatorUnavailableError as exc:
        print(f"logbroker: the coordinator cannot be reached: {exc}", file=sys.stderr)
        return 3
    return 0


async def _client_main(args: argparse.Namespace) -> int:
    async with Client(args.url, **admin.credentials(args)) as client:
        if args.command == "topic":
            return await _topic(client, args)
        if args.command == "produce":
            return await _produce(client, args)
        if args.command == "consume":
            return await _consume(client, args)
        if args.command == "cluster":
            return await _cluster(client, args)
        if args.command in ("group", "queue"):
            return await groups.run(client, args)
        return await admin.run(client, args)


async def _topic(client: Client, args: argparse.Namespace) -> int:
    if args.action == "create":
        config = dict(_key_value(item) for item in args.config)
        result: Any = await client.create_topic(args.name, partitions=args.partitions, kind=args.kind,
                                                replication_factor=args.replication_factor, config=config)
        _print(args, result, f"created {args.kind} {args.name} with {args.partitions} partition(s)")
    elif args.action == "list":
        topics = await client.list_topics()
        _print(args, topics, "\n".join(f"{t['name']}\t{t['kind']}\t{t['partitions']}" for t in topics))
    elif args.action == "describe":
        described = await client.describe_topic(args.name)
        lines = [f"{described['name']} ({described['kind']}), {described['partition_count']} partition(s)"]
        lines += [f"  partition {p['partition']}: leader {p['leader']} epoch {p['leader_epoch']} "
                  f"offsets [{p['earliest_offset']}, {p['latest_offset']})"
                  for p in described["partitions"]]
        lines += _config_lines(described["config"])
        _print(args, described, "\n".join(lines))
    elif args.action == "alter":
        changes = dict(_key_value(item, "alter", empty_is_none=True) for item in args.changes)
        described = await client.alter_topic_config(args.name, changes)
        lines = [f"altered {args.name}", *_config_lines(described["config"])]
        _print(args, described, "\n".join(lines))
    else:
        await client.delete_topic(args.name)
        _print(args, {"deleted": args.name}, f"deleted {args.name}")
    return 0


async def _cluster(client: Client, args: argparse.Namespace) -> int:
    if args.action in ("rebalance", "decommission"):
        result = await (client.rebalance() if args.action == "rebalance" else client.decommission(args.node_id))
        lines = [f"{m['topic']}/{m['partition']}: replicas {m['from']} -> {m['to']}" for m in result["moves"]]
        lines += [f"{m['topic']}/{m['partition']}: NOT moved ({m['code']}: {m['detail']})"
                  for m in result.get("failed", [])]
        lines += [f"{m['topic']}/{m['partition']}: stays (queues and group offsets cannot move yet)"
                  for m in result.get("stays", [])]
        _print(args, result, "\n".join(lines) or "nothing to move")
        return 0
    state = await client.cluster()
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    for topic in state["topics"]:
        for p in topic["partitions"]:
            leaders[p["leader"]] = leaders.get(p["leader"], 0) + 1
            for node in p["replicas"]:
                replicas[node] = replicas.get(node, 0) + 1
    lines = [f"cluster {state.get('cluster', '')} (answered by node {state.get('node_id')})"]
    for n in state["nodes"]:
        lines.append(f"  node {n['node_id']}\t{'alive' if n['alive'] else 'DEAD'}\t{n['http_url']}\t"
                     f"rack {n.get('rack') or '-'}\tleaders {leaders.get(n['node_id'], 0)}\t"
                     f"replicas {replicas.get(n['node_id'], 0)}")
    if leaders.get(-1):
        lines.append(f"  partitions without a leader: {leaders[-1]}")
    _print(args, state, "\n".join(lines))
    return 0


def _key_value(item: str, what: str = "--config", *, empty_is_none: bool = False) -> tuple[str, Any]:
    """``KEY=VALUE`` as a config entry: digits are a number, a list key's value comma-separated
    names (``leader_racks=b,a``), anything else text (``KEY=`` is None, back to the default, with
    ``empty_is_none``)."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InvalidRequestError(f"{what} takes KEY=VALUE, not {item!r}")
    if empty_is_none and not value:
        return key, None
    if key in LIST_CONFIG_KEYS:
        return key, [name.strip() for name in value.split(",") if name.strip()]
    return key, int(value) if value.lstrip("-").isascii() and value.lstrip("-").isdigit() else value


def _config_lines(config: dict[str, Any]) -> list[str]:
    return [f"  {key} = {','.join(config[key]) if isinstance(config[key], list) else config[key]}"
            for key in sorted(config)]


async def _produce(client: Client, args: argparse.Namespace) -> int:
    count = 0
    last = None
    async with Producer(client, acks=args.acks) as producer:
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\r\n")
            key, value = None, line
            if not args.no_keys and b"\t" in line:
                key, value = line.split(b"\t", 1)
            last = await producer.send(args.topic, value, key=key, partition=args.partition)
            count += 1
        await producer.flush()
    if last is not None:
        last.result()
    _print(args, {"records": count}, f"produced {count} record(s) to {args.topic}")
    return 0


async def _consume(client: Client, args: argparse.Namespace) -> int:
    described = await client.describe_topic(args.topic)
    partitions = args.partition or list(range(described["partition_count"]))
    async with Consumer(client, wait_ms=1000 if args.follow else 0) as consumer:
        consumer.assign([(args.topic, p) for p in partitions])
        ends = {}
        for p in partitions:
            if args.from_beginning:
                await consumer.seek_to_beginning(args.topic, p)
            elif args.offset is not None:
                consumer.seek(args.topic, p, args.offset)
            else:
                reset = consumer.seek_to_end if args.follow else consumer.seek_to_beginning
                await reset(args.topic, p)
            ends[p] = await client.list_offset(args.topic, p, "latest")
        shown = 0
        while args.max_records is None or shown < args.max_records:
            records = await consumer.poll()
            for record in records[: None if args.max_records is None else args.max_records - shown]:
                _show(args, record)
                shown += 1
            if not args.follow and all([await consumer.position(args.topic, p) >= ends[p] for p in partitions]):
                break
    return 0


def _show(args: argparse.Namespace, record: ConsumerRecord) -> None:
    if args.json:
        print(json.dumps({"topic": record.topic, "partition": record.partition, "offset": record.offset,
                          "timestamp": record.timestamp, "key": _text(record.key), "value": _text(record.value),
                          "headers": [[n, _text(v)] for n, v in record.headers]}), flush=True)
        return
    value = (record.value or b"").decode(errors="replace")
    print(f"{(record.key or b'').decode(errors='replace')}\t{value}" if args.print_key else value, flush=True)


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _print(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2) if args.json else human)


if __name__ == "__main__":
    sys.exit(main())
