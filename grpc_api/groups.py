"""Group subscriptions: a gRPC ``Subscribe`` with a ``group`` makes the caller a member of that
consumer group for as long as the call lasts, through the group coordinator's own calls (the ones
the HTTP group routes make), never through the node's HTTP listener (decision 0346).

**Here**, on the node that coordinates groups (a single node; on a cluster the leader of
``__consumer_offsets``, ``logbroker.cluster_groups``; ``Router.locate(GROUPS)`` says which): what
the HTTP join route checks (read on the topic and on the group, the caller's member limit, the
group's claim), a join, then the member's assigned partitions read from where the front door's
``member_positions`` says, as the HTTP member stream reads them. The member heartbeats after every round of reads, and a
round with nothing to send waits at most the heartbeat interval; a new generation starts over from
its positions. A record is delivered once gRPC has taken it; what was delivered is committed at
least every ``COMMIT_EVERY_S``, before a new generation's positions and when the call ends, then
the member leaves. Access is checked again at least every ``access_recheck_ms`` and whenever the
assignment changes. An error that ends the member's stream ends the call with its status.

**Elsewhere**, a cluster node passes the call on to the coordinating node's gRPC listener with the
caller's token, as HTTP passes group calls on to the coordinator's HTTP listener (decision 0197),
and relays its records and its refusal (code, message and retry advice unchanged). A call passed on
is marked and never passed on again. The channels are the caller's own (``GroupChannels``).

Either way the subscription holds one of the node's gRPC subscription slots and one of the
caller's ``streams_max`` (shared with their other streams) on the node that took the call; a call
passed on holds them on the coordinating node as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any, Final

import grpc

from coordinator.models import NodeInfo, validate_rack
from grpc_api import stubs
from grpc_api.convert import message_bytes_max
from grpc_api.deliveries import delivered
from grpc_api.errors import CODE_KEY, RETRY_KEY
from grpc_api.gate import Caller, authorization_of
from grpc_api.group_channels import GroupChannels, node_channel_opener
from logbroker.api import BrokerApi
from logbroker.api_types import CallContext
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.cluster_groups import ensure_offsets_topic
from logbroker.errors import ANY_ERROR, NoLeaderError, NotAvailableError, RemoteError
from logbroker.groups.requests import SESSION_TIMEOUT_MS_DEFAULT, CommitRequest, JoinRequest, group_name
from logbroker.node import Node
from logbroker.routing import Here, locate_groups

pb, pb_grpc = stubs.load()
COMMIT_EVERY_S: Final = 1.0
RESET: Final = "earliest"  # where a partition the group never committed starts (the HTTP stream's default)
FORWARDED_KEY: Final = "x-logbroker-forwarded"  # on a call passed on: the id of the node that passed it
PASS_ON_OPEN_TIMEOUT_S: Final = 30.0  # for the coordinating node to open the subscription (join included)
Slot = Callable[[CallContext, str | None], contextlib.AbstractContextManager[None]]


@dataclasses.dataclass(slots=True)
class _Membership:
    """A joined member and what it delivered but has not committed yet."""

    group: str
    member_id: str
    generation: int
    ctx: CallContext  # the caller as the member joined: its commits and its leave are theirs
    pending: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)
    committed_at: float = dataclasses.field(default_factory=time.monotonic)
    numbers: Iterator[int] = dataclasses.field(default_factory=itertools.count)  # a late commit never undoes a later


class GroupSubscriptions:
    def __init__(self, node: Node, front_door: BrokerApi, slot: Slot, *, fetch_bytes: int,
                 quota_pause_max_s: float) -> None:
        """``slot(ctx, counted_as)``: a node subscription slot and one of the caller's streams;
        reads go through ``front_door.streams`` (``StreamDoor.fetch``), which charges them."""
        self.node = node
        self._front_door = front_door
        self._slot = slot
        self._fetch_bytes = fetch_bytes
        self._quota_pause_max_s = quota_pause_max_s
        self._channels = GroupChannels(node_channel_opener(node.config, message_bytes_max(node.config)),
                                       node.config.grpc_calls_per_connection_max)

    async def close(self) -> None:
        await self._channels.close()

    async def batches(self, request: Any, topic: str, context: Any, caller: Caller) -> AsyncIterator[list[Any]]:
        """The records of the caller's membership in ``request.group``, a fetch's worth at a time."""
        group = group_name(request.group)
        rack = validate_rack(request.rack)
        principal, limits = caller
        await self._front_door.authorize(CallContext(principal, limits), topic, "read")
        await ensure_offsets_topic(self.node.coordinator, self.node.topics)
        where = await locate_groups(self.node.router)
        if isinstance(where, Here):
            records = self._here(topic, group, rack, context, principal, limits)
        elif _passed_on(context):
            raise NoLeaderError("this node no longer coordinates consumer groups; retry")
        else:
            records = self._pass_on(request, where.node, context, principal, limits)
        async with contextlib.aclosing(records):
            async for batch in records:
                yield batch

    # ---- here: the group coordinator's own calls --------------------------------------------------

    async def _here(self, topic: str, group: str, rack: str | None, context: Any, principal: Principal,
                    limits: QuotaLimits) -> AsyncGenerator[list[Any], None]:
        ctx = CallContext(principal, limits)
        await self._front_door.authorize_group(ctx, group, "read")  # before a stream slot is taken
        with self._slot(ctx, f"group:{group}"):
            async def join() -> JoinRequest:  # a new member of the default session, on the one topic
                return JoinRequest((topic,), SESSION_TIMEOUT_MS_DEFAULT, None, None)
            view = await self._front_door.group_join(ctx, group, join)
            member = _Membership(group, view["member_id"], view["generation"], ctx)
            try:
                await context.send_initial_metadata(())  # subscribed: the member stands
                records = self._member_records(member, view, rack, context, principal, limits)
                async with contextlib.aclosing(records):
                    async for batch in records:
                        yield batch
            finally:
                await asyncio.shield(self._leave(member))

    async def _member_records(self, member: _Membership, view: dict[str, Any], rack: str | None, context: Any,
                              principal: Principal, limits: QuotaLimits) -> AsyncGenerator[list[Any], None]:
        node = self.node
        checked_at, checked_topics = time.monotonic(), set(view["assignment"])

        front_door, streams = self._front_door, self._front_door.streams
        positions = await streams.member_positions(CallContext(principal, limits), member.group,
                                                   view["assignment"], {}, RESET)
        while True:
            topics = set(view["assignment"])
            if topics - checked_topics or time.monotonic() - checked_at >= node.config.access_recheck_ms / 1000:
                principal, limits = await self._recheck(context, member.group, topics, (principal, limits))
                checked_at, checked_topics = time.monotonic(), topics
            ctx = CallContext(principal, limits)
            if view["generation"] != member.generation:
                await self._commit(member)  # what the old generation delivered (refused once it moved on)
                member.generation = view["generation"]
                positions = await streams.member_positions(ctx, member.group, view["assignment"], positions, RESET)
            delay = streams.pause_s(ctx)
            if delay > 0:
                await asyncio.sleep(min(delay, self._quota_pause_max_s))
            else:
                sent = False
                for (topic, partition), offset in list(positions.items()):
                    result = await streams.fetch(ctx, topic, partition, offset,
                                                 max_bytes=self._fetch_bytes, wait_ms=0, rack=rack)
                    if not result.data:
                        continue
                    batch = delivered(node, topic, partition, offset, result)
                    positions[(topic, partition)] = result.next_offset
                    sent = True
                    if batch:
                        yield batch
                    member.pending[(topic, partition)] = result.next_offset  # gRPC has taken them
                    if time.monotonic() - member.committed_at >= COMMIT_EVERY_S:
                        await self._commit(member)
                if not sent:
                    await streams.wait(ctx, [(t, p, o) for (t, p), o in positions.items()],
                                       min(view["heartbeat_interval_ms"], node.config.access_recheck_ms))
            view = await front_door.group_heartbeat(ctx, member.group, member.member_id)

    async def _recheck(self, context: Any, group: str, topics: set[str], caller: Caller) -> Caller:
        """The caller authenticated again from the call's metadata, still allowed to read the group
        and every topic of its assignment (``AuthenticationError`` or ``ForbiddenError`` otherwise)."""
        auth = self.node.auth
        if not auth.enabled:
            return caller
        principal, limits = await auth.authenticate(authorization_of(context))
        ctx = CallContext(principal, limits)
        await self._front_door.authorize_group(ctx, group, "read")
        await self._front_door.authorize_each(ctx, topics, "read")
        return principal, limits

    async def _commit(self, member: _Membership) -> None:
        if member.pending:
            offsets = tuple((t, p, o) for (t, p), o in member.pending.items())
            member.pending.clear()
            request = CommitRequest(member.member_id, member.generation, offsets, next(member.numbers))
            with contextlib.suppress(*ANY_ERROR):  # a new generation: the next owner starts from the last commit
                await self._front_door.streams.commit_delivered(member.ctx, member.group, request)
        member.committed_at = time.monotonic()

    async def _leave(self, member: _Membership) -> None:
        with contextlib.suppress(*ANY_ERROR):  # else the session lapses on its own
            await self._commit(member)
            await self._front_door.streams.leave(member.ctx, member.group, member.member_id)

    # ---- elsewhere: the coordinating node's gRPC listener -----------------------------------------

    async def _pass_on(self, request: Any, target: NodeInfo, context: Any, principal: Principal,
                       limits: QuotaLimits) -> AsyncGenerator[list[Any], None]:
        address = target.grpc_address
        if not address:
            raise NoLeaderError(f"node {target.node_id}, which coordinates consumer groups, has no gRPC address; retry")
        authorization = authorization_of(context)
        metadata = ((FORWARDED_KEY, str(self.node.config.node_id)),
                    *((("authorization", authorization),) if authorization else ()))
        with self._slot(CallContext(principal, limits), None):
            async with self._channels.channel(principal.name, address) as channel:
                call = pb_grpc.BrokerStub(channel).SubscribeBatches(request, metadata=metadata)
                try:
                    async with asyncio.timeout(PASS_ON_OPEN_TIMEOUT_S):
                        await call.initial_metadata()
                        if call.done():  # refused before it stood
                            raise _relayed(await call.code(), await call.details(), await call.trailing_metadata(),
                                           address, opened=False)
                    await context.send_initial_metadata(())
                    async for message in call:
                        yield list(message.records)
                except TimeoutError as exc:
                    raise NoLeaderError(f"the node at {address} that coordinates consumer groups did not open the "
                                        "subscription in time; retry") from exc
                except grpc.aio.AioRpcError as exc:
                    raise _relayed(exc.code(), exc.details() or "", exc.trailing_metadata(), address,
                                   opened=True) from exc
                finally:
                    call.cancel()


def _passed_on(context: Any) -> bool:
    return any(key == FORWARDED_KEY for key, _ in context.invocation_metadata() or ())


def _relayed(status: grpc.StatusCode, details: str, trailing: Any, address: str, *, opened: bool) -> Exception:
    """The coordinating node's refusal as this node's: its code, message and retry advice as they
    came; a call that failed without one (the node unreachable, or gone mid-stream) is retriable."""
    if status == grpc.StatusCode.OK:
        return NotAvailableError(f"the node at {address} that coordinates consumer groups ended the subscription")
    metadata = {key: value for key, value in (trailing or ()) if isinstance(value, str)}
    code = metadata.get(CODE_KEY)
    if code is None:
        if not opened or status == grpc.StatusCode.UNAVAILABLE:
            return NoLeaderError(f"the node at {address} that coordinates consumer groups cannot be reached "
                                 f"({status.name}: {details}); retry")
        return NotAvailableError(f"the subscription through the node at {address} failed ({status.name}: {details})")
    wait_ms = metadata.get(RETRY_KEY)
    retry = {"retry_after_s": int(wait_ms) / 1000} if wait_ms is not None and wait_ms.isdigit() else {}
    return RemoteError(code, details, retriable=wait_ms is not None, **retry)
