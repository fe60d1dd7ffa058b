"""Crash witnesses in etcd (decision 0260): a node that found every address of another node's
registration refusing connections says so under ``crashes/<node>/<lease hex>/<witness>``, and the
witnesses together may end that node's session before its lease lapses.

Invariants:
- a witness key is put only while ``nodes/<node>`` is still at the revision the witness probed
  (one transaction: a restarted process, a new address or an ended session voids the evidence);
- it is put on the suspect's own lease, so the evidence goes with the session it is about;
- the lease is revoked only by a witness whose transaction saw enough distinct witnesses of
  that same lease (etcd serialises the transactions: of concurrent witnesses, the last one to
  commit sees all of them).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Final

from aetcd import rpc

from coordinator.errors import CoordinatorError
from coordinator.etcd_client import EtcdClient, cmp_mod, op_put
from coordinator.etcd_keys import prefix_range_end
from coordinator.models import NodeSession

log = logging.getLogger(__name__)

KIND: Final = "crashes"
REVOKE_TIMEOUT_S: Final = 2.0


def witness_prefix(node_id: int, lease: int) -> str:
    """The relative prefix of the witnesses of one session."""
    return f"{KIND}/{node_id}/{lease:x}/"


def parse_witness(relative: str) -> tuple[int, int, int] | None:
    """``(node, lease, witness)`` of a relative witness key, None for any other key."""
    parts = relative.split("/")
    if len(parts) != 4 or parts[0] != KIND or not parts[1].isdigit() or not parts[3].isdigit():
        return None
    try:
        lease = int(parts[2], 16)
    except ValueError:
        return None
    return int(parts[1]), lease, int(parts[3])


async def bear_witness(client: EtcdClient, prefix: str, node_key: bytes, session: NodeSession,
                       witness: int) -> frozenset[int] | None:
    """Record that ``witness`` found ``session``'s addresses refusing; the distinct witnesses of
    that session now (this one included), or None when the registration changed meanwhile."""
    key_prefix = (prefix + witness_prefix(session.info.node_id, session.lease)).encode()
    key = key_prefix + str(witness).encode()
    count = rpc.RequestOp(request_range=rpc.RangeRequest(key=key_prefix, range_end=prefix_range_end(key_prefix),
                                                         keys_only=True))
    try:
        resp = await client.txn([cmp_mod(node_key, session.mod_revision)],
                                [op_put(key, b"", session.lease), count])
    except CoordinatorError as exc:  # e.g. the lease ended between the read and the put
        log.info("crash witness of node %d not recorded: %s", session.info.node_id, exc)
        return None
    if not resp.succeeded:
        return None
    seen = {witness}
    for kv in resp.responses[1].response_range.kvs:
        parsed = parse_witness(bytes(kv.key).decode()[len(prefix):])
        if parsed is not None:
            seen.add(parsed[2])
    return frozenset(seen)


async def end_session(client: EtcdClient, session: NodeSession) -> bool:
    """Revoke the session's lease (its ``nodes/`` and leader keys go at once); False when etcd
    could not be asked (the lease then lapses by itself)."""
    with contextlib.suppress(CoordinatorError):
        await client.revoke(session.lease, timeout_s=REVOKE_TIMEOUT_S)
        return True
    return False
