"""``QueueConsumer``: competing consumption of a queue (receive with a visibility timeout, ack,
nack) and ``run``, a worker loop that acks what its handler processed and nacks what it failed.

Messages come as ``QueueMessage`` with bytes; a message not acked before its visibility timeout
is delivered again (to this worker or another), so handlers should be idempotent.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from logbroker.client.core import Client
from logbroker.client.errors import LogBrokerError

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class QueueMessage:
    receipt: str
    delivery_count: int
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def _bytes(raw: dict[str, Any], name: str) -> bytes | None:
    if raw.get(name + "_b64") is not None:
        return base64.b64decode(raw[name + "_b64"])
    text = raw.get(name)
    return None if text is None else str(text).encode()


def from_json(raw: dict[str, Any]) -> QueueMessage:
    """A message of ``Client.receive`` (JSON form)."""
    headers = [(h["name"], _bytes(h, "value") or b"") for h in raw.get("headers", [])]
    return QueueMessage(raw["receipt"], int(raw["delivery_count"]), int(raw["partition"]), int(raw["offset"]),
                        int(raw["timestamp"]), _bytes(raw, "key"), _bytes(raw, "value"), headers)


def _message(raw: dict[str, Any]) -> QueueMessage:
    return QueueMessage(raw["receipt"], raw["delivery_count"], raw["partition"], raw["offset"], raw["timestamp"],
                        raw["key"], raw["value"], [(n, v) for n, v in raw["headers"]])


Handler = Callable[[QueueMessage], Awaitable[None]]


class QueueConsumer:
    def __init__(self, client: Client, queue: str, *, max_messages: int = 100,
                 visibility_timeout_ms: int | None = None, wait_ms: int = 1000) -> None:
        self.client, self.queue = client, queue
        self.max_messages, self.visibility_timeout_ms, self.wait_ms = max_messages, visibility_timeout_ms, wait_ms

    async def receive(self, *, max_messages: int | None = None, wait_ms: int | None = None) -> list[QueueMessage]:
        raw = await self.client.receive_binary(self.queue, max_messages=max_messages or self.max_messages,
                                               visibility_timeout_ms=self.visibility_timeout_ms,
                                               wait_ms=self.wait_ms if wait_ms is None else wait_ms)
        return [_message(m) for m in raw]

    async def ack(self, messages: Sequence[QueueMessage | str]) -> dict[str, Any]:
        return await self.client.ack(self.queue, [_receipt(m) for m in messages])

    async def nack(self, messages: Sequence[QueueMessage | str], *, delay_ms: int = 0) -> dict[str, Any]:
        return await self.client.nack(self.queue, [_receipt(m) for m in messages], delay_ms=delay_ms)

    async def run(self, handler: Handler, *, stop: asyncio.Event, nack_delay_ms: int = 0,
                  max_batches: int | None = None) -> int:
        """Receive batches until ``stop`` is set (or ``max_batches``); each message goes to
        ``handler``; successes are acked in one call per batch, failures nacked. Returns the
        number of messages acked."""
        acked = 0
        batches = 0
        while not stop.is_set() and (max_batches is None or batches < max_batches):
            messages = await self.receive()
            batches += 1
            if not messages:
                continue
            good, bad = [], []
            for message in messages:
                try:
                    await handler(message)
                    good.append(message)
                except Exception:  # the handler's failure is the message's, not the loop's
                    log.exception("handler failed on %s/%s", message.partition, message.offset)
                    bad.append(message)
            if good:
                acked += await self._ack_handled(good)
            if bad:
                await self.nack(bad, delay_ms=nack_delay_ms)
        return acked

    async def _ack_handled(self, messages: list[QueueMessage]) -> int:
        """Ack what the handler finished; a batch whose leases all ran out meanwhile (409
        ``lease_expired``) settles nothing and is delivered again, which the loop survives."""
        try:
            return int((await self.ack(messages))["acked"])
        except LogBrokerError as exc:
            if exc.code != "lease_expired":
                raise
            log.warning("leases ran out before the ack; %d message(s) will be delivered again", len(messages))
            return 0


def _receipt(message: QueueMessage | str) -> str:
    return message if isinstance(message, str) else message.receipt
