"""The CLI's group and queue commands: ``group list|describe|delete|acl-get|acl-set|reset-offsets``
and ``queue send|receive``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Final

from logbroker.client import Client
from logbroker.errors import InvalidRequestError

SEND_BATCH: Final = 1000
LIST_PAGE: Final = 1000  # groups asked for per GET /v1/groups page (the node's default)
LIST_PAGES_MAX: Final = 100_000  # a node holds at most 100,000 groups; each page moves the cursor on


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    group = sub.add_parser("group", help="consumer groups", description="consumer groups")
    actions = group.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="list the groups you may see, by name, following every page",
                                 parents=[common])
    listing.add_argument("--limit", type=int, default=None, metavar="N", help="at most N groups")
    listing.add_argument("--after", default=None, metavar="NAME", help="start after this group name")
    listing.add_argument("--page-size", type=int, default=LIST_PAGE, metavar="N",
                         help=f"groups per request (1 to 10000, default {LIST_PAGE})")
    actions.add_parser("describe", help="members, assignment, committed offsets and lag",
                       parents=[common]).add_argument("name")
    actions.add_parser("delete", help="delete an empty group and its committed offsets (owner or admin)",
                       parents=[common]).add_argument("name")
    actions.add_parser("acl-get", help="owner and grants of a group", parents=[common]).add_argument("name")
    grant = actions.add_parser("acl-set", help="grant read (join, commit) on a group; no permission revokes",
                               parents=[common])
    grant.add_argument("name")
    grant.add_argument("grantee", metavar="user")
    grant.add_argument("permissions", nargs="*", metavar="read", help="read, or nothing to revoke")
    reset = actions.add_parser("reset-offsets", help="set a group's committed offsets (the group must be empty)",
                               parents=[common])
    reset.add_argument("name")
    reset.add_argument("--topic", required=True)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-timestamp", type=int, metavar="MS")
    target.add_argument("--to-offset", action="append", metavar="PARTITION=OFFSET", help="repeatable")
    reset.add_argument("--partition", type=int, action="append", help="repeatable; default: all")

    queue = sub.add_parser("queue", help="queues", description="queues")
    queue_actions = queue.add_subparsers(dest="action", required=True)
    send = queue_actions.add_parser("send", help="send lines from stdin (key<TAB>value when a line has a tab)",
                                    parents=[common])
    send.add_argument("name")
    receive = queue_actions.add_parser("receive", help="receive messages and ack them (unless --no-ack)",
                                       parents=[common])
    receive.add_argument("name")
    receive.add_argument("--max-messages", type=int, default=10)
    receive.add_argument("--visibility-timeout-ms", type=int, default=None)
    receive.add_argument("--wait-ms", type=int, default=0)
    receive.add_argument("--no-ack", action="store_true", help="leave them leased (they come back after the timeout)")


async def run(client: Client, args: argparse.Namespace) -> int:
    if args.command == "group":
        return await _group(client, args)
    return await _queue(client, args)


def _print(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2) if args.json else human)


async def _group(client: Client, args: argparse.Namespace) -> int:
    if args.action == "list":
        groups, more_after = await _list_groups(client, args.after, args.limit, args.page_size)
        _print(args, groups, "\n".join(f"{g['group']}\t{g['state']}\tgeneration {g['generation']}\t"
                                       f"{g['members']} member(s)" for g in groups))
        if more_after is not None:
            print(f"more groups follow: --after {more_after}", file=sys.stderr)
    elif args.action == "describe":
        described = await client.describe_group(args.name)
        lines = [f"{described['group']} ({described['state']}), generation {described['generation']}, "
                 f"strategy {described['strategy']}, {len(described['members'])} member(s)"]
        lines += [f"  member {m['member_id']}: {m['assignment']}" for m in described["members"]]
        lines += [f"  {o['topic']}/{o['partition']}: committed {o['committed_offset']} "
                  f"high watermark {o['high_watermark']} lag {o['lag']} owner {o['member_id']}"
                  for o in described["offsets"]]
        _print(args, described, "\n".join(lines))
    elif args.action == "delete":
        await client.delete_group(args.name)
        _print(args, {"deleted": args.name}, f"deleted group {args.name}")
    elif args.action in ("acl-get", "acl-set"):
        acl = (await client.get_group_acl(args.name) if args.action == "acl-get"
               else await client.set_group_acl(args.name, args.grantee, args.permissions))
        _print(args, acl, "\n".join([f"{acl['group']} owned by {acl['owner']}"]
                                    + [f"  {g['user']}: {', '.join(g['permissions'])}" for g in acl["acl"]]))
    else:
        to, partitions, timestamp, offsets = _reset_target(args)
        result = await client.reset_group_offsets(args.name, args.topic, to, partitions=partitions,
                                                  timestamp=timestamp, offsets=offsets)
        _print(args, result, "\n".join(f"{args.topic}/{o['partition']} -> {o['offset']}" for o in result["offsets"]))
    return 0


async def _list_groups(client: Client, after: str | None, limit: int | None,
                       page_size: int) -> tuple[list[dict[str, Any]], str | None]:
    """The groups after ``after`` (at most ``limit``), following ``next_after`` page by page, and
    the name to continue after when ``limit`` stopped the listing before the end."""
    if limit is not None and limit < 1:
        raise InvalidRequestError("--limit must be at least 1")
    groups: list[dict[str, Any]] = []
    for _ in range(LIST_PAGES_MAX):
        wanted = page_size if limit is None else min(page_size, limit - len(groups))
        params = {"limit": str(wanted), **({"after": after} if after is not None else {})}
        _, _, body = await client.request("GET", "/v1/groups", params=params)
        page = json.loads(body)
        groups += page["groups"]
        after = page.get("next_after")
        if after is None:
            return groups, None
        if limit is not None and len(groups) >= limit:
            return groups, groups[-1]["group"]
    raise InvalidRequestError(f"the group list did not end within {LIST_PAGES_MAX} pages")


def _reset_target(args: argparse.Namespace) -> tuple[str, Any, Any, Any]:
    partitions = args.partition
    if args.to_offset:
        if partitions:
            raise InvalidRequestError("--partition does not apply to --to-offset")
        offsets = {}
        for item in args.to_offset:
            partition, sep, offset = item.partition("=")
            if not sep or not partition.isdigit() or not offset.isdigit():
                raise InvalidRequestError(f"--to-offset takes PARTITION=OFFSET, not {item!r}")
            offsets[int(partition)] = int(offset)
        return "offsets", None, None, offsets
    if args.to_timestamp is not None:
        return "timestamp", partitions, args.to_timestamp, None
    return ("earliest" if args.to_earliest else "latest"), partitions, None, None


async def _queue(client: Client, args: argparse.Namespace) -> int:
    if args.action == "send":
        sent = 0
        batch: list[dict[str, Any]] = []
        for line in sys.stdin:
            text = line.rstrip("\r\n")
            key, tab, value = text.partition("\t")
            batch.append({"key": key, "value": value} if tab else {"value": text})
            if len(batch) >= SEND_BATCH:
                sent += len(await client.send_messages(args.name, batch))
                batch = []
        if batch:
            sent += len(await client.send_messages(args.name, batch))
        _print(args, {"messages": sent}, f"sent {sent} message(s) to {args.name}")
        return 0
    messages = await client.receive(args.name, max_messages=args.max_messages,
                                    visibility_timeout_ms=args.visibility_timeout_ms, wait_ms=args.wait_ms)
    acked = 0
    if messages and not args.no_ack:
        acked = int((await client.ack(args.name, [m["receipt"] for m in messages]))["acked"])
    if args.json:
        print(json.dumps({"messages": messages, "acked": acked}, indent=2))
    else:
        for m in messages:
            value = m.get("value") if m.get("value") is not None else m.get("value_b64", "")
            print(f"{m['partition']}/{m['offset']}\t{m['delivery_count']}\t{value}")
    return 0
