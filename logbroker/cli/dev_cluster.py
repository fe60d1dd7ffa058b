"""``logbroker dev-cluster status|stop N|kill N|start N``: one node of a running ``make cluster``.

The command asks the launcher (``logbroker.dev_cluster_control``) in the work dir ``CLUSTER_DIR``
(default ``./.data/cluster``), which does the work and owns the node afterwards. ``status`` adds
which partitions each node leads, asked of a running node with the development admin's
credentials (bounded; left out, with the reason, when no node answers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

from logbroker.client import Client, LogBrokerError
from logbroker.dev_cluster_control import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    NODE_IDS,
    NODE_START_TIMEOUT_S,
    ControlError,
    ask,
    request,
    work_dir_from_env,
)
from logbroker.launcher import STOP_TIMEOUT_S

LEADERS_TIMEOUT_S: Final = 5.0
LEADS_SHOWN_MAX: Final = 12
# A start waits for the node's ready line; a stop for its exit (SIGKILL after STOP_TIMEOUT_S).
REPLY_TIMEOUT_S: Final = {"status": 10.0, "stop": 2 * STOP_TIMEOUT_S + 10.0, "kill": STOP_TIMEOUT_S + 10.0,
                          "start": NODE_START_TIMEOUT_S + 10.0}


def add_commands(sub: Any) -> None:
    text = ("act on one node of a running `make cluster` (work dir: env CLUSTER_DIR, default ./.data/cluster); "
            "the other nodes keep serving")
    dev = sub.add_parser("dev-cluster", help="stop, kill or start one node of a running `make cluster`",
                         description=text)
    actions = dev.add_subparsers(dest="action", required=True)
    status = actions.add_parser("status", help="each node: pid or down, URL, the partitions it leads")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    for action, help_text in (("stop", "stop a node gracefully (SIGTERM)"), ("kill", "kill a node (SIGKILL)"),
                              ("start", "start a stopped node again: same command line, ports and data dir")):
        actions.add_parser(action, help=help_text, description=help_text).add_argument("node_id", type=int)


def run(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> int:
    work_dir = work_dir_from_env(env)
    try:
        message = request(args.action, getattr(args, "node_id", None), NODE_IDS)
        reply = ask(work_dir, message, REPLY_TIMEOUT_S[args.action])
    except ControlError as exc:
        print(f"logbroker dev-cluster: {exc}", file=sys.stderr)
        return 1
    if args.action != "status":
        print(reply["message"])
        return 0
    cluster = reply["cluster"]
    leaders, why = _leaders([n["http_url"] for n in cluster["nodes"] if n["pid"] is not None])
    if args.json:
        print(json.dumps({**cluster, "leaders": {str(k): v for k, v in (leaders or {}).items()}}, indent=2))
    else:
        print(format_status(cluster, leaders, why))
    return 0


def _leaders(urls: Sequence[str]) -> tuple[dict[int, list[str]] | None, str]:
    """Which partitions each node leads, as a running node says; None and why when none says."""
    if not urls:
        return None, "no node is running"

    async def fetch() -> dict[str, Any]:
        async with asyncio.timeout(LEADERS_TIMEOUT_S):
            async with Client(list(urls), username=ADMIN_USER, password=ADMIN_PASSWORD,
                              timeout_s=LEADERS_TIMEOUT_S, connect_timeout_s=LEADERS_TIMEOUT_S) as client:
                return await client.cluster()

    try:
        return leaders_by_node(asyncio.run(fetch())), ""
    except (LogBrokerError, OSError, TimeoutError) as exc:
        return None, f"no node said ({type(exc).__name__}: {exc})"


def leaders_by_node(cluster: Mapping[str, Any]) -> dict[int, list[str]]:
    """``topic/partition`` names by leader node id, from ``GET /v1/cluster``'s answer."""
    leaders: dict[int, list[str]] = {}
    for topic in cluster.get("topics", []):
        for p in topic.get("partitions", []):
            leaders.setdefault(p["leader"], []).append(f"{topic['name']}/{p['partition']}")
    return leaders


def format_status(cluster: Mapping[str, Any], leaders: Mapping[int, list[str]] | None, why: str = "") -> str:
    """What ``status`` prints: the cluster's etcd, then one line per node."""
    etcd = cluster["etcd"]
    lines = [f"make cluster in {cluster['work_dir']} (launcher pid {cluster['launcher_pid']}, "
             f"etcd pid {etcd['pid']} at {etcd['url']})"]
    for node in cluster["nodes"]:
        if node["pid"] is None:
            state = "down" + ("" if node["exit_code"] is None else f" (exited with {node['exit_code']})")
        else:
            state = f"pid {node['pid']}"
        line = f"  node {node['node_id']}  {state:<24} {node['http_url']}"
        if node["pid"] is not None and leaders is not None:
            led = leaders.get(node["node_id"], [])
            more = len(led) - LEADS_SHOWN_MAX
            line += "  leads " + (", ".join(led[:LEADS_SHOWN_MAX]) if led else "nothing") + \
                (f" and {more} more" if more > 0 else "")
        lines.append(line)
    if leaders is not None and leaders.get(-1):
        lines.append(f"  without a leader: {', '.join(leaders[-1][:LEADS_SHOWN_MAX])}")
    if leaders is None:
        lines.append(f"  leaders: unknown ({why})")
    return "\n".join(lines)
