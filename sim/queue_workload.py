"""The queue part of a cluster schedule (``sim.cluster_run``): competing consumers on a replicated
queue, through the nodes' real queue code entered by the front door (``BrokerApi``, as HTTP's
queue routes enter it), under the same faults as the topic's writers.

A queue of ``QUEUE_PARTITIONS`` partitions with three replicas lives on the leader of its
partition 0 (its *home*); a call made at another node goes where that node's router sends it
(``Router.locate``), as the HTTP API's pass-on does (``http_api.pass_on``).

- ``sender``: one message at a time with ``acks=all`` (``queue_send`` invoke/ok/fail/info);
- ``receiver``: receives up to ``RECEIVE_MAX`` messages, leased for ``VISIBILITY_MS``, records
  them (``deliver``) and acknowledges them (``queue_ack``: ok when every receipt was settled);
- ``drain``: after the heal, receives and acknowledges until nothing was delivered for longer than
  a lease (so every message leased by a receive whose ack failed has come back).

The chaos checker judges them (``chaos.checker``): no acknowledged send is never delivered
(``queue_lost``, once drained), and no message is delivered by a receive that began after its
acknowledgement was answered (``queue_redelivered_after_ack``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from logbroker.api import BrokerApi
from logbroker.api_types import Answered, CallContext
from logbroker.auth.permissions import ANONYMOUS_ADMIN
from logbroker.auth.quotas import QuotaLimits
from logbroker.errors import NoLeaderError
from logbroker.node import Node
from logbroker.queues.requests import ReceiveRequest
from logbroker.records import IncomingRecord
from logbroker.routing import Here, QueueTarget
from segments.batch import ProducerRecord
from sim.schedule import Schedule

QUEUE: Final = "q"
QUEUE_PARTITIONS: Final = 2
SEND_GAP_S: Final = (0.1, 0.6)
RECEIVE_GAP_S: Final = (0.1, 0.8)
RECEIVE_MAX: Final = 10
VISIBILITY_MS: Final = 2_000
DRAIN_QUIET_S: Final = VISIBILITY_MS / 1000 + 1.0  # nothing delivered this long: the queue is empty
DRAIN_MAX_S: Final = 60.0
DRAIN_POLL_S: Final = 0.25


def queue_spec(replicas: int) -> dict[str, Any]:
    return {"name": QUEUE, "kind": "queue", "partitions": QUEUE_PARTITIONS, "replication_factor": replicas}


class QueueWorkload:
    def __init__(self, schedule: Schedule) -> None:
        self._s = schedule
        self.sending = self.receiving = True

    def _home(self, via: int) -> int | None:
        """Where ``via`` would pass a queue call on to (``Router.locate``, as the HTTP pass-on
        does; itself when it answers the call), None when its router refuses (the HTTP API answers
        ``no_leader`` then) or names a node that is down."""
        try:
            where = self._s.nodes()[via].router.locate(QueueTarget(QUEUE))
        except NoLeaderError:
            return None
        home = via if isinstance(where, Here) else where.node.node_id
        return home if home in self._s.alive() else None

    async def sender(self, name: str) -> None:
        s = self._s
        n = 0
        while self.sending:
            alive = s.alive()
            via = s.rng.choice(alive) if alive else None
            home = None if via is None else self._home(via)
            if home is not None:
                n += 1
                value = f"{name}-{n}"
                s.record("queue_send", "invoke", name, value=value)
                records = [IncomingRecord(ProducerRecord(value.encode()), None)]
                kind, answer = await s.call(home, f"send-{value}", _send, records)
                if kind == "ok":
                    s.record("queue_send", kind, name, value=value)
                    s.event(f"{name} {value} via n{via} at n{home} ok @{answer[0]['partition']}:{answer[0]['offset']}")
                else:
                    s.record("queue_send", kind, name, value=value, error=answer)
                    s.event(f"{name} {value} via n{via} at n{home} {kind} {answer}")
            await asyncio.sleep(s.rng.uniform(*SEND_GAP_S))

    async def receiver(self, name: str) -> None:
        while self.receiving:
            await self.receive_once(name)
            await asyncio.sleep(self._s.rng.uniform(*RECEIVE_GAP_S))

    async def receive_once(self, name: str) -> int | None:
        """One receive and the ack of what it got; how many messages it got (None: no home was
        known, or the receive failed)."""
        s = self._s
        alive = s.alive()
        via = s.rng.choice(alive) if alive else None
        home = None if via is None else self._home(via)
        if home is None:
            return None
        begun = s.loop.time()
        kind, answer = await s.call(home, f"receive-{name}", _receive)
        if kind != "ok":
            s.record("deliver", "info", name, invoke_time=begun, error=answer)
            s.event(f"{name} receive at n{home} {kind} {answer}")
            return None
        if not answer:
            return 0
        ids = [f"{m['partition']}:{m['offset']}" for m in answer]
        s.record("deliver", "ok", name, invoke_time=begun,
                 values=[[bytes(m["value"] or b"").decode(), m["delivery_count"], i] for m, i in zip(answer, ids,
                                                                                                   strict=True)])
        receipts = [m["receipt"] for m in answer]
        kind, settled = await s.call(home, f"ack-{name}", _ack, receipts)
        complete = kind == "ok" and int(settled.get("acked", 0)) == len(ids) and not settled.get("failed")
        s.record("queue_ack", "ok" if complete else "info", name, ids=ids)
        s.event(f"{name} got {ids} at n{home}, ack {'ok' if complete else f'{kind} {settled}'}")
        return len(ids)

    async def drain(self) -> bool:
        """Receive and acknowledge until the queue's home answered every receive, with nothing,
        for ``DRAIN_QUIET_S``; False (and the seed fails) when that did not happen within
        ``DRAIN_MAX_S``."""
        s = self._s
        end = s.loop.time() + DRAIN_MAX_S
        quiet_since: float | None = None  # since when every receive was answered empty
        while s.loop.time() < end:
            got = await self.receive_once("drain")
            if got is None or got:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = s.loop.time()
            elif s.loop.time() - quiet_since >= DRAIN_QUIET_S:
                s.event("queue drained")
                return True
            await asyncio.sleep(DRAIN_POLL_S)
        s.fail("queue-drain", f"the queue was not answered empty for {DRAIN_QUIET_S:g} s within {DRAIN_MAX_S:g} s "
                              "of the heal")
        return False


# The calls enter as HTTP's do, through the front door (decision 0402), as the caller a node with
# authentication off sees; a deadline-free context, so the front door reads no clock.
CALLER: Final = CallContext(ANONYMOUS_ADMIN, QuotaLimits())
RECEIVE_BODY: Final = {"max_messages": RECEIVE_MAX, "visibility_timeout_ms": VISIBILITY_MS}


class _Records:
    """A send's records as the front door takes them (``QueuePayload``): already received."""

    def __init__(self, records: list[IncomingRecord]) -> None:
        self._records = records

    def received_bytes(self) -> int:
        return sum(len(r.record.value or b"") for r in self._records)

    async def receive(self) -> None:
        return None

    async def decode(self) -> list[IncomingRecord]:
        return self._records


async def _send(node: Node, records: list[IncomingRecord]) -> Any:
    # A node that does not manage the queue refuses (the front door looks it up before decoding).
    sent = await BrokerApi(node).queue_send(CALLER, QUEUE, _Records(records), "all")
    return sent.offsets


async def _receive(node: Node) -> list[dict[str, Any]]:
    async def body() -> object:
        return RECEIVE_BODY

    async def answer(asked: ReceiveRequest, messages: list[dict[str, Any]]) -> Answered[list[dict[str, Any]]]:
        return Answered(messages, 0, len(messages))
    return await BrokerApi(node).queue_receive(CALLER, QUEUE, body, binary=True, answer=answer)


async def _ack(node: Node, receipts: list[str]) -> dict[str, Any]:
    async def body() -> object:
        return {"receipts": receipts}
    return await BrokerApi(node).queue_ack(CALLER, QUEUE, body)
