"""The access-control commands of ``logbroker``: ``token``, ``user create|list|delete|topics|passwd``,
``acl get|set``, ``topic-owner``, and ``certs`` (development CA and node certificates).

Credentials for every client command come from ``--user``/``--password`` or ``--token``, else
from ``LOGBROKER_USER``/``LOGBROKER_PASSWORD`` or ``LOGBROKER_TOKEN``. A new user's password is
read from ``--new-password``, else prompted for on a terminal, else read as one line of stdin,
so it need not appear in the process list. Changing your own password (``user passwd`` with your
own name) also sends your current one: ``--current-password``, else the ``--password`` you log in
with, else prompted for on a terminal; an admin resetting another user's password needs none.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from logbroker.client import Client
from logbroker.client.core import PASSWORD_ENV, TOKEN_ENV, USER_ENV
from logbroker.errors import InvalidRequestError


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    sub.add_parser("token", help="print an access token (for curl: -H \"Authorization: Bearer $TOKEN\")",
                   parents=[common])

    user = sub.add_parser("user", help="manage users (admin)", description="manage users (admin)")
    actions = user.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a user", parents=[common])
    create.add_argument("name")
    create.add_argument("--role", choices=("user", "admin"), default="user")
    create.add_argument("--new-password", default=None, help="default: prompt, or one line of stdin")
    actions.add_parser("list", help="list users", parents=[common])
    delete = actions.add_parser("delete", help="delete a user", parents=[common])
    delete.add_argument("name")
    delete.add_argument("--reassign-to", default=None, help="the user who takes over their topics")
    actions.add_parser("topics", help="what a user owns and is granted", parents=[common]).add_argument("name")
    passwd = actions.add_parser("passwd", help="change a password", parents=[common])
    passwd.add_argument("name")
    passwd.add_argument("--new-password", default=None, help="default: prompt, or one line of stdin")
    passwd.add_argument("--current-password", default=None,
                        help="your current password, to change your own (default: --password, or a prompt)")

    acl = sub.add_parser("acl", help="grant access to a topic or queue", description="grant access")
    acl_actions = acl.add_subparsers(dest="action", required=True)
    acl_actions.add_parser("get", help="owner and grants of a topic", parents=[common]).add_argument("topic")
    grant = acl_actions.add_parser("set", help="set a user's permissions (empty revokes)", parents=[common])
    grant.add_argument("topic")
    grant.add_argument("grantee")
    grant.add_argument("permissions", help="read, write, read,write or '' to revoke")
    owner = sub.add_parser("topic-owner", help="give a topic to another user (admin)", parents=[common])
    owner.add_argument("topic")
    owner.add_argument("owner")

    certs_parser = sub.add_parser("certs", help="make development CAs, node and etcd certificates",
                                  description="Write ca.pem/ca.key and node-<id>.pem/.key (server and client "
                                  "auth) for HTTPS and the internal RPC's mutual TLS, and etcd-ca.pem/.key, "
                                  "etcd-server.pem/.key (etcd's --cert-file) and etcd-client.pem/.key (what "
                                  "nodes present to etcd's --client-cert-auth).")
    certs_parser.add_argument("--out", default="./certs", help="output directory (default ./certs)")
    certs_parser.add_argument("--nodes", default="1", help="comma-separated node ids (default 1)")
    certs_parser.add_argument("--host", action="append", default=[], help="extra host name or IP (repeatable)")
    certs_parser.add_argument("--etcd-host", action="append", default=[],
                              help="extra host name or IP of etcd's server certificate (repeatable)")


def credentials(args: argparse.Namespace) -> dict[str, Any]:
    """``Client`` keyword arguments: each flag, else its environment variable; a lone user or password is an error."""
    out: dict[str, Any] = {"ca_file": args.ca_file, "cert_file": args.cert_file, "key_file": args.key_file}
    if args.token and (args.user or args.password):
        raise InvalidRequestError("give --token or --user/--password, not both")
    token = args.token or (None if args.user or args.password else os.environ.get(TOKEN_ENV) or None)
    if token:
        out.update(token=token)
    elif args.user or args.password or os.environ.get(USER_ENV) or os.environ.get(PASSWORD_ENV):
        username, password = login_pair(args, os.environ)
        out.update(username=username, password=password)
    return out


def login_pair(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str]:
    """The user name and password to log in with: each flag, else its environment variable."""
    user = args.user or env.get(USER_ENV) or None
    password = args.password or env.get(PASSWORD_ENV) or None
    if user is None or password is None:
        missing = " and ".join(name for name, value in (("--user", user), ("--password", password)) if value is None)
        raise InvalidRequestError(f"logging in needs {missing} (or {USER_ENV}/{PASSWORD_ENV})")
    return user, password


def _new_password(args: argparse.Namespace) -> str:
    if args.new_password:
        return str(args.new_password)
    if sys.stdin.isatty():
        return getpass.getpass(f"password for {args.name}: ")
    return sys.stdin.readline().rstrip("\r\n")


def _current_password(args: argparse.Namespace) -> str | None:
    """The caller's current password when they change their own, else None (an admin's reset)."""
    if args.current_password:
        return str(args.current_password)
    user = args.user or os.environ.get(USER_ENV)
    if user != args.name:
        return None
    password = args.password or os.environ.get(PASSWORD_ENV)
    if password:
        return str(password)
    if sys.stdin.isatty():
        return getpass.getpass(f"current password of {args.name}: ")
    return None


def _print(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2) if args.json else human)


async def run(client: Client, args: argparse.Namespace) -> int:
    if args.command == "token":
        user, password = login_pair(args, os.environ)
        answer = await client.login(user, password)
        _print(args, answer, answer["access_token"])
    elif args.command == "user":
        await _user(client, args)
    elif args.command == "acl":
        if args.action == "get":
            acl = await client.get_acl(args.topic)
        else:
            permissions = [p.strip() for p in args.permissions.split(",") if p.strip()]
            acl = await client.set_acl(args.topic, args.grantee, permissions)
        lines = [f"{acl['topic']}: owner {acl['owner']}"]
        lines += [f"  {entry['user']}: {','.join(entry['permissions'])}" for entry in acl["acl"]]
        _print(args, acl, "\n".join(lines))
    else:
        acl = await client.set_owner(args.topic, args.owner)
        _print(args, acl, f"{acl['topic']}: owner {acl['owner']}")
    return 0


async def _user(client: Client, args: argparse.Namespace) -> None:
    if args.action == "create":
        created = await client.create_user(args.name, _new_password(args), role=args.role)
        _print(args, created, f"created {created['role']} {created['name']}")
    elif args.action == "list":
        users = await client.list_users()
        _print(args, users, "\n".join(f"{u['name']}\t{u['role']}" for u in users))
    elif args.action == "delete":
        result = await client.delete_user(args.name, reassign_to=args.reassign_to)
        moved = result["reassigned_topics"]
        _print(args, result, f"deleted {args.name}" + (f"; {len(moved)} topic(s) now owned by "
                                                         f"{args.reassign_to}" if moved else ""))
    elif args.action == "topics":
        owned = await client.user_topics(args.name)
        lines = [f"owns: {', '.join(owned['topics']) or '-'}"]
        lines += [f"granted {','.join(g['permissions'])} on {g['topic']}" for g in owned["grants"]]
        _print(args, owned, "\n".join(lines))
    else:
        current = _current_password(args)
        await client.change_password(args.name, _new_password(args), current_password=current)
        _print(args, {"changed": args.name}, f"changed the password of {args.name}")


def certs(args: argparse.Namespace) -> int:
    from logbroker.certs import generate, generate_etcd

    try:
        node_ids = [int(n) for n in args.nodes.split(",") if n.strip()]
    except ValueError as exc:
        raise InvalidRequestError(f"--nodes takes comma-separated integers, not {args.nodes!r}") from exc
    for path in [*generate(args.out, node_ids, args.host), *generate_etcd(args.out, args.etcd_host)]:
        print(path)
    return 0
