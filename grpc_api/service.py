"""``logbroker.v1.Broker``: Publish and Subscribe over the node's own paths.

Every call comes through ``grpc_api.gate``, which authenticated the ``authorization`` metadata as
HTTP does (``AuthService``) before the request arrived; here it is handed to the broker's front
door (``logbroker.api.BrokerApi``, decision 0373) with the caller and the call's deadline: Publish
is one ``publish`` (first use, authorization, quota, acks, the node's produce, the charge), and a
partition subscription authorizes through it when it opens and at each recheck, holds its slot,
waits out the caller's quota debt and reads through its ``streams`` (``StreamDoor.fetch``, which
charges what it read). The node
forwards to the partition's leader, so any node answers.

Subscribe follows the tail with one bounded long-poll at a time and sends the next records only
when gRPC has taken the previous ones (an async generator: a slow client holds the node to one
fetch of ``FETCH_BYTES`` in memory). Access is checked again at least every
``access_recheck_ms``. With a ``group``, the caller becomes a member of that consumer group
through the group coordinator's own calls, passed on to the node that coordinates groups on a
cluster (``grpc_api.groups``).

A stored batch whose records cannot be decoded is passed over (the records around it are sent) and
reported in the node's log and metrics (decision 0220): a ``Record`` stream has no place to say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any, Final

from coordinator.models import validate_name, validate_rack
from grpc_api import stubs
from grpc_api.convert import incoming_records
from grpc_api.deliveries import delivered
from grpc_api.errors import abort_for
from grpc_api.gate import Caller, authorization_of
from grpc_api.groups import GroupSubscriptions
from logbroker.api import BrokerApi
from logbroker.api_types import CallContext
from logbroker.errors import ANY_ERROR, InvalidRequestError, NotAvailableError
from logbroker.node import Node
from logbroker.records import IncomingRecord

pb, pb_grpc = stubs.load()
FETCH_BYTES: Final = 1024 * 1024
WAIT_MS: Final = 1000
QUOTA_PAUSE_MAX_S: Final = 1.0
LATEST, EARLIEST = -1, -2
STREAMS_MAX: Final = 1_000  # gRPC subscriptions (of a partition or in a group) open on the node at once


class BrokerService:
    """The methods of ``logbroker.v1.Broker``, each called by ``CallGate`` with the caller it authenticated."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._streams = 0
        self.api = BrokerApi(node)
        self._groups = GroupSubscriptions(node, self.api, self._stream_slot, fetch_bytes=FETCH_BYTES,
                                          quota_pause_max_s=QUOTA_PAUSE_MAX_S)

    async def close(self) -> None:
        await self._groups.close()

    async def _recheck(self, context: Any, topic: str) -> CallContext:
        """The caller authenticated again from the call's metadata and authorized to read ``topic``
        (an open stream's recheck)."""
        ctx = call_context(await self.node.auth.authenticate(authorization_of(context)), context)
        await self.api.authorize(ctx, topic, "read")
        return ctx

    async def Publish(self, request: Any, context: Any, caller: Caller) -> Any:
        try:
            published = await self.api.publish(call_context(caller, context), request.topic, _Message(request),
                                               request.acks or "1", idempotency_key=request.idempotency_key or None)
        except ANY_ERROR as exc:
            await abort_for(context, exc)
        response = pb.PublishResponse()
        add = response.positions.add
        for position in published.offsets:
            add(partition=position["partition"], offset=position["offset"])
        return response

    async def Subscribe(self, request: Any, context: Any, caller: Caller) -> AsyncGenerator[Any, None]:
        async for batch in self._batches(request, context, caller):
            for record in batch:
                yield record

    async def SubscribeBatches(self, request: Any, context: Any, caller: Caller) -> AsyncGenerator[Any, None]:
        async for batch in self._batches(request, context, caller):
            yield pb.Records(records=batch)

    async def _batches(self, request: Any, context: Any, caller: Caller) -> AsyncIterator[list[Any]]:
        try:
            topic = validate_name(request.topic, internal=True)
            if request.group:
                async for batch in self._groups.batches(request, topic, context, caller):
                    yield batch
            else:
                async for batch in self._partition_records(request, topic, context, caller):
                    yield batch
        except ANY_ERROR as exc:
            await abort_for(context, exc)

    @contextlib.contextmanager
    def _node_slot(self) -> Iterator[None]:
        """One of the node's ``STREAMS_MAX`` gRPC subscriptions (UNAVAILABLE when none is left),
        held while the subscription lasts."""
        if self._streams >= STREAMS_MAX:
            raise NotAvailableError(f"{self._streams} gRPC subscriptions are already open; retry later")
        self._streams += 1
        try:
            yield
        finally:
            self._streams -= 1

    @contextlib.contextmanager
    def _stream_slot(self, ctx: CallContext, counted_as: str | None) -> Iterator[None]:
        """A node slot and one of the caller's ``streams_max``, shared with their HTTP push streams
        (RESOURCE_EXHAUSTED past it), counted as their usage under ``counted_as`` (None: a call
        passed on, counted where it is served); a group subscription's too."""
        with self._node_slot(), self.api.streams.held(ctx, counted_as):
            yield

    async def _partition_records(self, request: Any, topic: str, context: Any,
                                 caller: Caller) -> AsyncIterator[list[Any]]:
        node, front_door = self.node, self.api
        ctx = call_context(caller, context)
        await front_door.authorize(ctx, topic, "read")
        partition = request.partition
        if partition < 0:
            raise InvalidRequestError("partition must be a non-negative integer")
        rack = validate_rack(request.rack)
        offset = request.offset
        if offset < EARLIEST:
            raise InvalidRequestError("offset must be >= 0, -1 (the end) or -2 (the earliest)")
        if offset < 0:
            offset = await front_door.streams.start(ctx, topic, partition, "latest" if offset == LATEST else "earliest")
        with self._stream_slot(ctx, topic):
            await context.send_initial_metadata(())  # subscribed: what is appended from now on reaches the caller
            checked = time.monotonic()
            while True:
                if time.monotonic() - checked >= node.config.access_recheck_ms / 1000:
                    ctx = await self._recheck(context, topic)
                    checked = time.monotonic()
                delay = front_door.streams.pause_s(ctx)
                if delay > 0:
                    await asyncio.sleep(min(delay, QUOTA_PAUSE_MAX_S))
                    continue
                result = await front_door.streams.fetch(ctx, topic, partition, offset, max_bytes=FETCH_BYTES,
                                                        wait_ms=WAIT_MS, rack=rack)
                if not result.data:
                    continue
                batch = delivered(node, topic, partition, offset, result)
                offset = result.next_offset
                if batch:
                    yield batch


class _Message:
    """A ``PublishRequest`` as the front door's ``Payload``: charged its whole size (it was
    received and parsed before the call ran)."""

    def __init__(self, request: Any) -> None:
        self.request = request

    def received_bytes(self) -> int:
        return int(self.request.ByteSize())

    async def decode(self) -> list[IncomingRecord]:
        return incoming_records(self.request.records)


def call_context(caller: Caller, context: Any) -> CallContext:
    """The front door's context of a call's authenticated ``caller``, with the call's deadline."""
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    return CallContext(caller[0], caller[1], deadline)
