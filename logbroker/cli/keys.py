"""``logbroker keys create|rotate|remove|reencrypt``: the key ring of encryption at rest (0315-0317).

``create`` and ``rotate`` write the ring atomically with mode 0600 and print only key ids, never
keys. ``reencrypt`` runs on a stopped node's data directory (``logbroker.reencrypt``), so that
``remove`` can then take the old key out of the ring. ``create``, ``rotate`` and ``remove`` run on
the base install; ``reencrypt`` needs the server extra (``cryptography``).
"""

from __future__ import annotations

import argparse
import os

from logbroker.errors import InvalidRequestError
from segments.key_ring import KeyRing, KeyRingError, load_ring, new_key, write_ring


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser("keys", help="the key ring of encryption at rest",
                          description="Manage the key ring a node reads from --encryption-keys-file.")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="write a new key ring (mode 0600) with one key")
    create.add_argument("--out", required=True, help="the key ring file to write (must not exist)")
    rotate = actions.add_parser("rotate", help="add a new key to a ring and make it current")
    rotate.add_argument("--file", required=True, help="the key ring file")
    remove = actions.add_parser("remove", help="take a key that no batch needs any more out of a ring")
    remove.add_argument("--file", required=True, help="the key ring file")
    remove.add_argument("--id", type=int, required=True, help="the key id to remove (never the current one)")
    again = actions.add_parser("reencrypt", help="rewrite a stopped node's segments under the current key",
                               description="Reseal every stored batch that a key other than the current one "
                               "sealed, segment by segment, crash-safely (write aside, fsync, rename). The node "
                               "must be stopped (its data directory is locked meanwhile).")
    again.add_argument("--data-dir", required=True, help="the node's data directory")
    again.add_argument("--file", required=True, help="the key ring file (with every key still in use)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "create":
            return _create(args.out)
        if args.action == "rotate":
            ring = load_ring(args.file).rotated(new_key())
            write_ring(args.file, ring)
            print(f"{args.file}: key {ring.current} added and current; keys {sorted(ring.keys)}")
            return 0
        if args.action == "remove":
            ring = load_ring(args.file).without(args.id)
            write_ring(args.file, ring)
            print(f"{args.file}: key {args.id} removed; keys {sorted(ring.keys)}")
            return 0
        return _reencrypt(args.data_dir, args.file)
    except KeyRingError as exc:
        raise InvalidRequestError(str(exc)) from exc


def _create(out: str) -> int:
    """A missing directory is made (mode 0700: it holds a key); one that cannot be is a clear error."""
    if os.path.lexists(out):
        raise InvalidRequestError(f"{out} exists: a new key ring never replaces one (use `logbroker keys rotate`)")
    try:
        os.makedirs(os.path.dirname(out) or ".", mode=0o700, exist_ok=True)
        write_ring(out, KeyRing({1: new_key()}, 1))
    except OSError as exc:
        raise InvalidRequestError(f"cannot write the key ring {out}: {exc.strerror or exc}") from exc
    print(f"{out}: key ring with key 1 (current), mode 0600")
    return 0


def _reencrypt(data_dir: str, ring_path: str) -> int:
    from logbroker.data_dir_lock import DataDirInUseError
    from logbroker.reencrypt import reencrypt_data_dir
    from segments.errors import UndecryptableBatchError

    ring = load_ring(ring_path)
    try:
        report = reencrypt_data_dir(data_dir, ring)
    except (DataDirInUseError, FileNotFoundError, UndecryptableBatchError) as exc:
        raise InvalidRequestError(str(exc)) from exc
    print(f"{data_dir}: {report.segments_rewritten} of {report.segments_seen} segment(s) rewritten, "
          f"{report.batches_resealed} batch(es) resealed under key {ring.current}")
    return 0
