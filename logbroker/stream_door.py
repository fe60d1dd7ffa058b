"""The front door's half for calls that run on (decisions 0373, 0413): an HTTP push stream or
WebSocket subscription, a gRPC subscription, a produce stream. ``BrokerApi.streams`` is this
node's; the protocols call nothing of the node's read path, write path, group coordinator or
quotas themselves (``tests/test_front_door.py``).

A stream authorizes when it opens and again on its protocol's schedule (``BrokerApi.authorize``,
``authorize_group``; authentication is the protocol's). Its slot among the caller's
``streams_max`` is held and its time counted as usage for as long as it is open (``held``). It
starts where ``start`` says or, for a group member, ``member_positions``; its reads wait out the
caller's quota debt (``pause_s``) instead of being refused, and are charged as they are read
(``fetch``) or, when the protocol renders them first, as they are sent (``read``, then
``charge_sent`` per piece). A produce stream opens through ``open_write`` and each of its messages
goes through ``publish``: paced by the produce quota, charged before its append (so the next
message's pacing sees it while this one waits for its acks), checked as an HTTP produce of one
prebuilt batch is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from coordinator.models import validate_name
from logbroker.api_types import OPERATIONS, Acks, CallContext, Payload, Prebuilt, check_acks
from logbroker.auth.permissions import Action
from logbroker.auth.quotas import QuotaKind
from logbroker.batch_limits import CheckedBatch
from logbroker.errors import InvalidRequestError
from logbroker.groups.group import STANDALONE
from logbroker.groups.group import Caller as MemberCaller
from logbroker.groups.positions import start_positions
from logbroker.groups.requests import CommitRequest
from logbroker.producer_ids import check_writer

if TYPE_CHECKING:
    from logbroker.groups.coordinator import GroupCoordinator
    from logbroker.node import Node
    from segments.log import LogRead

Authorize = Callable[[CallContext, str, Action], Awaitable[None]]
ListOffsets = Callable[[CallContext, str, int, str], Awaitable[dict[str, int | None]]]
GroupsOf = Callable[[], Awaitable["GroupCoordinator"]]


class Charge(Protocol):
    """``BrokerApi``'s one charge of a caller's quota and usage."""

    def __call__(self, ctx: CallContext, kind: QuotaKind, size_bytes: int, topic: str, records: int, *,
                 requests: int) -> None: ...


class StreamDoor:
    def __init__(self, node: Node, *, authorize: Authorize, list_offsets: ListOffsets, charge: Charge,
                 groups: GroupsOf) -> None:
        """The front door's own checks, lookups and charge, as ``BrokerApi`` passes them;
        ``groups``: this node's group coordinator, waited for while it loads."""
        self.node = node
        self._authorize = authorize
        self._list_offsets = list_offsets
        self._charge = charge
        self._groups = groups

    @contextlib.contextmanager
    def held(self, ctx: CallContext, counted_as: str | None) -> Iterator[None]:
        """One of the caller's streams (429 past ``streams_max``) while the block runs, counted as
        their usage under ``counted_as`` (a topic, or ``group:<name>``) with the time it stays
        open; None counts nothing (a call passed on to the node that serves it, which counts it)."""
        auth, principal = self.node.auth, ctx.principal
        counted = contextlib.nullcontext() if counted_as is None else auth.meter.streaming(principal.name, counted_as)
        with auth.usage.hold(principal, ctx.limits, "streams"), counted:
            yield

    def pause_s(self, ctx: CallContext, kind: QuotaKind = "fetch") -> float:
        """How long a stream waits before its next read (or a produce stream its next message):
        the caller's debt on the ``kind`` quota."""
        auth = self.node.auth
        return auth.quotas.delay_s(ctx.principal.name, kind, ctx.limits) if auth.enabled else 0.0

    # ---- reading ------------------------------------------------------------------------------

    async def start(self, ctx: CallContext, topic: str, partition: int, at: str) -> int:
        """Where a stream given no offset starts: the partition's ``at`` (latest, earliest) offset."""
        return int((await self._list_offsets(ctx, topic, partition, at))["offset"] or 0)

    async def member_positions(self, ctx: CallContext, group: str, assignment: dict[str, list[int]],
                               kept: dict[tuple[str, int], int], reset: str) -> dict[tuple[str, int], int]:
        """Where a member stream reads next in each partition of ``assignment``: where it was
        (``kept``), else the group's committed offset, else the partition's ``reset`` offset
        (earliest, latest)."""
        groups = await self._groups()

        def committed(topic: str, partition: int) -> int | None:
            return groups.committed(group, topic, partition)

        async def reset_offset(topic: str, partition: int) -> int:
            return await self.start(ctx, topic, partition, reset)
        return await start_positions(assignment, kept, committed, reset_offset)

    async def read(self, ctx: CallContext, topic: str, partition: int, offset: int, *, max_bytes: int,
                   wait_ms: int, rack: str | None) -> LogRead:
        """One read, charged by the protocol as it sends it (``charge_sent``). Its wait is not cut
        to the call's deadline: a stream ends when its call does, and a read that stopped waiting
        would make its loop spin."""
        result, _ = await self.node.reads.fetch(topic, partition, offset, max_bytes, wait_ms, client_rack=rack)
        return result

    async def fetch(self, ctx: CallContext, topic: str, partition: int, offset: int, *, max_bytes: int,
                    wait_ms: int, rack: str | None) -> LogRead:
        """One read, charged at once: what it read."""
        result = await self.read(ctx, topic, partition, offset, max_bytes=max_bytes, wait_ms=wait_ms, rack=rack)
        if result.data:
            self.charge_sent(ctx, topic, len(result.data), max(0, result.next_offset - offset))
        return result

    def charge_sent(self, ctx: CallContext, topic: str, size_bytes: int, records: int = 0) -> None:
        """The stream sent ``size_bytes`` of ``topic`` (``records`` of them): charged to the
        caller's fetch quota and counted, no request (the stream counted one when it opened)."""
        self._charge(ctx, "fetch", size_bytes, topic, records, requests=0)

    async def wait(self, ctx: CallContext, positions: Iterable[tuple[str, int, int]], wait_ms: int) -> None:
        """Until one of a member stream's ``(topic, partition, offset)`` has data, or ``wait_ms``."""
        await self.node.reads.wait_for_any(list(positions), wait_ms)

    async def commit_delivered(self, ctx: CallContext, group: str, commit: CommitRequest) -> None:
        """Commit what a member stream delivered. Not authorized again: what the caller was sent
        while allowed is theirs to commit, also when the stream ends because they lost access
        (else the next member would get it again); the coordinator checks the member is theirs.
        Never a commit without a member, which would claim the group unchecked."""
        if commit.member_id == STANDALONE:
            raise InvalidRequestError("a stream commits for its member")
        await (await self._groups()).commit(group, commit, member_caller(ctx))

    async def leave(self, ctx: CallContext, group: str, member: str) -> None:
        """A member stream's member leaves as its stream ends: not authorized again, so a caller
        who lost read on the group still takes their member out at once (the coordinator checks
        it is theirs)."""
        await (await self._groups()).leave(group, member, member_caller(ctx))

    # ---- writing ------------------------------------------------------------------------------

    async def open_write(self, ctx: CallContext, topic: str, partition: int, acks: str) -> Acks:
        """A produce stream opens: ``acks`` checked, the caller authorized to write ``topic``, and
        the partition known (404 before the protocol upgrades the connection)."""
        checked_acks = check_acks(acks)
        topic = validate_name(topic, internal=True)
        await self._authorize(ctx, topic, OPERATIONS["publish"][0])
        await self.node.reads.list_offset(topic, partition, "latest")
        return checked_acks

    def answers_at_append(self, topic: str, partition: int, acks: Acks) -> bool:
        """Whether a message's answer waits for nothing after its append (``WritePath.answers_at_append``)."""
        return self.node.writes.answers_at_append(topic, partition, acks)

    async def publish(self, ctx: CallContext, topic: str, payload: Payload, acks: Acks, *,
                      on_appended: Callable[[], None]) -> tuple[list[dict[str, int]], CheckedBatch]:
        """One message of a produce stream: the offsets and the checked batch. Refused or not, its
        bytes are charged (a large invalid one is not free)."""
        while (delay := self.pause_s(ctx, "produce")) > 0:
            await asyncio.sleep(delay)
        self._charge(ctx, "produce", payload.received_bytes(), topic, 0, requests=1)
        incoming = await payload.decode()
        if not isinstance(incoming, Prebuilt):
            raise InvalidRequestError("a produce stream carries prebuilt batches")
        checked = incoming.checked
        check_writer(checked.header, ctx.principal.name)
        writes = self.node.writes
        writes.check_timestamps(topic, checked.timestamp_min, checked.timestamp_max)
        offsets = await writes.produce_batch(topic, incoming.partition, incoming.batch, acks, on_appended=on_appended)
        self._charge(ctx, "produce", 0, topic, checked.header.record_count, requests=0)
        return offsets, checked


def member_caller(ctx: CallContext) -> MemberCaller:
    """The caller as the group coordinator checks it against a member's owner."""
    return MemberCaller(ctx.principal.name, ctx.principal.is_admin)
