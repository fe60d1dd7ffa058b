"""The broker's one front door for moving records: every protocol (HTTP, gRPC, any later one)
authenticates its caller its own way, builds a ``CallContext`` and calls ``BrokerApi``, which
does the rest in one place and one order (decision 0373).

A request (``publish``, ``fetch``, ``list_offsets``): the topic name checked; for a write, the
topic created on first use (``logbroker.first_use``); the topic action authorized; the caller's
byte-rate quota checked; the request decoded and ``acks`` checked (``check_acks``, the one check
and its one message); the node called; the bytes moved charged to the quota and counted as usage
through ``Meter`` (one ``_charge``, so usage always matches what quotas saw). A write is charged
the bytes received whether it is stored or refused once past the quota check (validation has its
cost); a read is charged the size of the answer the protocol sends, after it rendered it.

A queue call (``queue_send``, ``queue_receive``, ``queue_ack``, ``queue_nack``, ``queue_state``;
decision 0402) follows the same order: the name checked, a send's queue created on first use, the
action authorized (``write`` to send, ``read`` to receive or settle, ``describe`` for the state),
the quota checked (send and receive), the body read and decoded only then, the node's queue
called, and a send charged what was received, a receive the answer its protocol rendered; a
settle and a state read are neither quota-checked nor metered.

A consumer group's membership call (``group_join``, ``group_heartbeat``, ``group_leave``,
``group_commit``): the group's name checked; the caller authorized to ``read`` the group; only
then the request read and decoded by its protocol (a join's, a commit's) and a member id checked;
the caller authorized to read every topic the request names; for a join, a new member counted
against the caller's ``group_members_max`` and the group claimed by its first join (or first commit
without a member); the group coordinator called (waited for, bounded, while this node loads the
groups: ``routing.while_groups_start``) with the caller as it checks a member's owner. Not
quota-checked nor metered.

Streams (push streams, subscriptions, produce streams) go through ``streams``, this front door's
half for calls that run on (``logbroker.stream_door``, decision 0413).

Topic administration (``create_topic``, ``add_partitions``, ``alter_topic_config``,
``delete_topic``, ``describe_topic``; the ``check_*`` twins do every check and change nothing,
for Kafka's ``validate_only``): the topic action authorized (``manage``, ``describe``; creating
needs only an authenticated caller, who becomes the owner, nobody with authentication off); the
caller's holdings checked against ``topics_max`` and ``partitions_max`` under their creation
lock, so two concurrent creates cannot both pass a check only one fits (admins are exempt); the
node called. ``kind`` lets a protocol that knows only topics (Kafka) treat a queue as unknown,
after the caller was authorized (so it learns no more than from any other name). HTTP's route
table also authorizes its ``manage`` routes before their body is read (a refused caller gets 403
before any 400): the check here repeats it, in memory.

Invariant: authentication and connection limits are the protocol's; authorization, quotas,
``acks`` and charging for these calls happen here and nowhere else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from coordinator.errors import InvalidTopicError, TopicExistsError, UnknownTopicError
from coordinator.models import (
    INTERNAL_PREFIX,
    TopicKind,
    TopicMetadata,
    TopicSpec,
    check_partition_growth,
    validate_name,
)
from coordinator.topic_config import alter_config
from logbroker import first_use
from logbroker.api_types import (
    GROUP_OPERATIONS,
    OPERATIONS,
    Answered,
    Body,
    CallContext,
    Payload,
    Prebuilt,
    Published,
    QueuePayload,
    T,
    check_acks,
)
from logbroker.auth.groups import GroupAction
from logbroker.auth.permissions import Action
from logbroker.auth.quotas import QuotaKind
from logbroker.auth.usage import check_limit, check_member_limit
from logbroker.errors import ANY_ERROR
from logbroker.groups.group import STANDALONE
from logbroker.groups.requests import CommitRequest, JoinRequest, group_name, member_id
from logbroker.metering.ledger import OTHER
from logbroker.ownership import creation_cost, growth_cost, holdings
from logbroker.producer_ids import check_writer
from logbroker.queues.requests import ReceiveRequest, parse_receipts, parse_receive
from logbroker.routing import while_groups_start
from logbroker.stream_door import StreamDoor, member_caller

if TYPE_CHECKING:
    from logbroker.groups.coordinator import GroupCoordinator
    from logbroker.node import Node
    from segments.log import LogRead, LogSlice

R = TypeVar("R")


class BrokerApi:
    def __init__(self, node: Node, clock: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self._clock = clock
        self.streams = StreamDoor(node, authorize=self.authorize, list_offsets=self.list_offsets, charge=self._charge,
                                  groups=self._groups)

    async def publish(self, ctx: CallContext, topic: str, payload: Payload, acks: str, *,
                      idempotency_key: str | None = None) -> Published:
        """Store the records of ``payload`` in ``topic`` (created on first use): their offsets."""
        node, (action, kind) = self.node, OPERATIONS["publish"]
        assert kind is not None
        topic = validate_name(topic, internal=True)
        creating = await first_use.missing(node, topic)
        if not creating:  # else authorized once created
            await self.authorize(ctx, topic, action)
        self._check_quota(ctx, kind)
        records = 0
        try:
            incoming = await payload.decode()
            checked_acks = check_acks(acks)
            if isinstance(incoming, Prebuilt):
                check_writer(incoming.checked.header, ctx.principal.name)
            if creating:  # only once the body is known good: a refused write creates nothing
                await first_use.create(node, topic, "topic", ctx.principal, ctx.limits)
                await self.authorize(ctx, topic, action)
            if isinstance(incoming, Prebuilt):
                checked = incoming.checked
                node.writes.check_timestamps(topic, checked.timestamp_min, checked.timestamp_max)
                offsets = await node.writes.produce_batch(topic, incoming.partition, incoming.batch, checked_acks)
                records = checked.header.record_count
            else:
                offsets = await node.writes.produce_records(topic, incoming, checked_acks, idempotency_key,
                                                            writer=ctx.principal.name)
                records = len(offsets)
            return Published(offsets, records)
        finally:
            self._charge(ctx, kind, payload.received_bytes(), self._metered(topic), records, requests=1)

    async def create_on_first_use(self, ctx: CallContext, topic: str) -> bool:
        """Make ``topic`` as a write to it would (node setting ``auto_create``, ``first_use``): for a
        protocol whose clients ask for a topic before they write (Kafka's Metadata). Whether it
        was made."""
        topic = validate_name(topic, internal=True)
        if not await first_use.missing(self.node, topic):
            return False
        await first_use.create(self.node, topic, "topic", ctx.principal, ctx.limits)
        return True

    async def fetch(self, ctx: CallContext, topic: str, partition: int, offset: int, *, max_bytes: int,
                    wait_ms: int, rack: str | None,
                    answer: Callable[[tuple[LogRead, int]], Awaitable[Answered[T]]], long_poll_held: bool = False) -> T:
        """Read ``topic``/``partition`` from ``offset`` (waiting up to ``wait_ms`` at the end of the
        log) into ``answer``, which renders ``(read, high watermark)`` as its protocol sends it.
        ``long_poll_held``: the caller holds one of its long-polls for a request that waits on many
        partitions at once (``long_polls_hold``), so this wait takes none of its own."""
        node = self.node

        def read(wait: int) -> Awaitable[tuple[LogRead, int]]:
            return node.reads.fetch(topic, partition, offset, max_bytes, wait, client_rack=rack)
        return await self._read(ctx, topic, wait_ms, read, answer, long_poll_held=long_poll_held)

    def long_polls_hold(self, ctx: CallContext) -> contextlib.AbstractContextManager[None]:
        """One of the caller's long-polls, held while one request waits (429 past long_polls_max)."""
        return self.node.auth.usage.hold(ctx.principal, ctx.limits, "long_polls")

    async def fetch_raw(self, ctx: CallContext, topic: str, partition: int, offset: int, *, max_bytes: int,
                        wait_ms: int, rack: str | None,
                        answer: Callable[[tuple[LogSlice | LogRead | None, int]], Awaitable[Answered[T]]]) -> T:
        """``fetch`` as stored batches: a slice of the log (sent from the file), or the leader's
        bytes when forwarded, or None when there is nothing past ``offset``."""
        node = self.node

        def read(wait: int) -> Awaitable[tuple[LogSlice | LogRead | None, int]]:
            return node.reads.fetch_slice(topic, partition, offset, max_bytes, wait, client_rack=rack)
        return await self._read(ctx, topic, wait_ms, read, answer)

    async def list_offsets(self, ctx: CallContext, topic: str, partition: int, at: str) -> dict[str, int | None]:
        """The earliest, latest or first offset at a timestamp (``at``) of a partition."""
        topic = validate_name(topic, internal=True)
        await self.authorize(ctx, topic, OPERATIONS["list_offsets"][0])
        return await self.node.reads.list_offset(topic, partition, at)

    async def authorize(self, ctx: CallContext, topic: str, action: Action) -> None:
        """Refuse (403, or 404 to admins) unless the caller may do ``action`` to ``topic``; a
        stream calls it when it opens and again at its rechecks."""
        auth = self.node.auth
        if auth.enabled:
            await auth.authorize_topic(ctx.principal, topic, action)

    # ---- topic administration ----------------------------------------------------------------

    async def create_topic(self, ctx: CallContext, body: object) -> dict[str, Any]:
        """Create the topic or queue ``body`` describes (``POST /v1/topics``' body), owned by the
        caller (nobody with authentication off), within the caller's holding limits: the topic
        as described."""
        owner = ctx.principal.name if self.node.auth.enabled else None
        async with self._creating(ctx, body):
            return await self.node.topics.create_topic(body, owner=owner)

    async def check_create_topic(self, ctx: CallContext, body: object) -> TopicSpec:
        """``create_topic``'s checks, creating nothing: the holding limits, the body as the node
        parses it, the node's encryption and the name still free (a queue's dead-letter topic and
        the node's partition budget are the node's, checked when it creates)."""
        node = self.node
        async with self._creating(ctx, body):
            spec = TopicSpec.parse(body, base_config=node.base_log_config, bounds=node.config_bounds)
            node.at_rest.check_topic_config(spec.config)
            try:
                await node.coordinator.get_topic(spec.name)
            except UnknownTopicError:
                return spec
            raise TopicExistsError(f"{spec.name!r} already exists")

    async def add_partitions(self, ctx: CallContext, topic: str, body: object, *,
                             kind: TopicKind | None = None) -> dict[str, Any]:
        """Raise ``topic``'s partition count to ``body``'s (``{"partitions": N}``), charged to the
        caller's ``partitions_max``: the topic as described."""
        await self._authorized(ctx, topic, "manage", kind)
        async with self._growing(ctx, topic, body):
            return await self.node.topics.add_partitions(topic, body)

    async def check_add_partitions(self, ctx: CallContext, topic: str, partitions: int, *,
                                   kind: TopicKind | None = None) -> None:
        """``add_partitions``' checks, adding nothing."""
        meta = await self._authorized(ctx, topic, "manage", kind)
        async with self._growing(ctx, topic, {"partitions": partitions}):
            _check_not_internal(topic, "its partitions follow what it belongs to")
            check_partition_growth(meta or await self.node.coordinator.get_topic(topic), partitions)

    async def alter_topic_config(self, ctx: CallContext, topic: str, changes: object, *,
                                 kind: TopicKind | None = None) -> dict[str, Any]:
        """Change ``topic``'s config (``{key: value}``, None: back to the default): the topic as
        described."""
        await self._authorized(ctx, topic, "manage", kind)
        return await self.node.topics.alter_topic_config(topic, changes)

    async def check_alter_topic_config(self, ctx: CallContext, topic: str, changes: object, *,
                                       kind: TopicKind | None = None) -> dict[str, Any]:
        """``alter_topic_config``'s checks, changing nothing: the config the topic would store."""
        node = self.node
        meta = await self._authorized(ctx, topic, "manage", kind)
        _check_not_internal(topic, "its config is the broker's")
        merged = alter_config(meta or await node.coordinator.get_topic(topic), changes,
                              base_config=node.base_log_config, bounds=node.config_bounds)
        if isinstance(changes, dict):
            node.at_rest.check_topic_config(changes)
        return merged

    async def describe_topic(self, ctx: CallContext, topic: str, *, kind: TopicKind | None = None,
                             offsets: bool = True) -> dict[str, Any]:
        """``topic`` as ``TopicAdmin.describe_topic`` describes it, to a caller who may describe it."""
        await self._authorized(ctx, topic, "describe", kind)
        return await self.node.topics.describe_topic(topic, offsets=offsets)

    async def delete_topic(self, ctx: CallContext, topic: str, *, kind: TopicKind | None = None,
                           topic_id: str | None = None) -> None:
        """Delete ``topic`` and its data; with ``topic_id``, only while the topic of that name is
        the one with this id (else ``UnknownTopicError``: it was deleted or made again)."""
        meta = await self._authorized(ctx, topic, "manage", kind)
        if topic_id is not None:
            meta = meta or await self.node.coordinator.get_topic(topic)
            if meta.topic_id != topic_id:
                raise UnknownTopicError(f"topic {topic!r} no longer has id {topic_id}")
        await self.node.topics.delete_topic(topic)

    async def _authorized(self, ctx: CallContext, topic: str, action: Action,
                          kind: TopicKind | None) -> TopicMetadata | None:
        """``authorize``, then, when ``kind`` is given, ``UnknownTopicError`` unless ``topic`` is
        one: its metadata (None when ``kind`` is not given)."""
        await self.authorize(ctx, topic, action)
        if kind is None:
            return None
        meta = await self.node.coordinator.get_topic(topic)
        if meta.kind != kind:
            raise UnknownTopicError(f"unknown {kind} {topic!r} (it is a {meta.kind})")
        return meta

    @contextlib.asynccontextmanager
    async def _creating(self, ctx: CallContext, body: object) -> AsyncIterator[None]:
        """Around creating a topic or queue: refuse (429) when it would take the caller past
        ``topics_max`` or ``partitions_max``. A queue costs two topics and twice its partitions and
        one more: its state log has a partition per queue partition, and its dead-letter topic (one
        partition) is created with it and owned by the same user."""
        principal, limits = ctx.principal, ctx.limits
        if principal.is_admin or not (limits.topics_max or limits.partitions_max):
            yield
            return
        kind = body.get("kind") if isinstance(body, dict) else None
        async with self.node.auth.usage.creating(principal.name):
            topics, partitions = holdings(principal.name, await self.node.coordinator.list_topics())
            check_limit(principal, limits, "topics_max", topics, 2 if kind == "queue" else 1)
            check_limit(principal, limits, "partitions_max", partitions,
                        creation_cost(kind, _asked_partitions(body), new_dead_letter=True))
            yield

    @contextlib.asynccontextmanager
    async def _growing(self, ctx: CallContext, topic: str, body: object) -> AsyncIterator[None]:
        """Around growing ``topic``: refuse (429) when its new partitions (a queue's state
        partitions too) take the caller past ``partitions_max`` (growth is charged to the caller,
        who manages the topic)."""
        principal, limits = ctx.principal, ctx.limits
        if principal.is_admin or not limits.partitions_max:
            yield
            return
        node = self.node
        async with node.auth.usage.creating(principal.name):
            _, partitions = holdings(principal.name, await node.coordinator.list_topics())
            try:
                current: TopicMetadata | None = await node.coordinator.get_topic(topic)
            except ANY_ERROR:
                current = None  # the node answers for an unknown topic
            more = _asked_partitions(body) - current.partitions if current is not None else 0
            if current is not None and more > 0:
                check_limit(principal, limits, "partitions_max", partitions, growth_cost(current.kind, more))
            yield

    # ---- queues ------------------------------------------------------------------------------

    async def queue_send(self, ctx: CallContext, queue: str, payload: QueuePayload, acks: str, *,
                         idempotency_key: str | None = None) -> Published:
        """Store the records of ``payload`` in ``queue`` (created on first use): their offsets. The
        order is the HTTP route's since queues began: authorized and within quota, the whole body
        received, the queue known (404, 409 when it is a topic), the records decoded, then stored
        (``acks`` checked by the node's write path); charged what was received, stored or not."""
        node, (action, kind) = self.node, OPERATIONS["queue_send"]
        assert kind is not None
        queue = validate_name(queue, internal=True)
        creating = await first_use.missing(node, queue)
        if not creating:  # else authorized once created
            await self.authorize(ctx, queue, action)
        self._check_quota(ctx, kind)
        records = 0
        try:
            await payload.receive()
            if not creating:
                node.queues.get(queue)
            incoming = await payload.decode()
            if creating:  # only once the body is known good: a refused send creates nothing
                await first_use.create(node, queue, "queue", ctx.principal, ctx.limits)
                await self.authorize(ctx, queue, action)
                node.queues.get(queue)
            offsets = await node.writes.produce_records(queue, incoming, acks, idempotency_key,
                                                        writer=ctx.principal.name)
            records = len(offsets)
            return Published(offsets, records)
        finally:
            self._charge(ctx, kind, payload.received_bytes(), self._metered(queue), records, requests=1)

    async def queue_receive(self, ctx: CallContext, queue: str, body: Body, *, binary: bool,
                            answer: Callable[[ReceiveRequest, list[dict[str, Any]]], Awaitable[Answered[T]]]) -> T:
        """Lease messages of ``queue`` as ``body`` asks (``ReceiveRequest``; ``binary``: payloads as
        bytes), holding one of the caller's long-polls while it waits, into ``answer``, which renders
        them as its protocol sends them (an HTTP long-poll checks its caller again first, decision
        0175): charged the size of that answer and the messages it holds."""
        node, (action, kind) = self.node, OPERATIONS["queue_receive"]
        assert kind is not None
        queue = validate_name(queue, internal=True)
        await self.authorize(ctx, queue, action)
        self._check_quota(ctx, kind)
        request = parse_receive(await body(), node.config.fetch_wait_ms_max)
        if ctx.deadline is not None:
            request = dataclasses.replace(request, wait_ms=ctx.wait_ms(request.wait_ms, self._clock()))
        if request.wait_ms > 0:
            with self.long_polls_hold(ctx):
                messages = await node.queues.receive(queue, request, binary=binary)
        else:
            messages = await node.queues.receive(queue, request, binary=binary)
        answered = await answer(request, messages)
        self._charge(ctx, kind, answered.size_bytes, self._metered(queue), answered.records, requests=1)
        return answered.value

    async def queue_ack(self, ctx: CallContext, queue: str, body: Body) -> dict[str, Any]:
        """Settle the leases whose receipts ``body`` lists: how many, and those that matched none."""
        queue = await self._settling(ctx, queue)
        receipts, _ = parse_receipts(await body(), nack=False)
        return await self.node.queues.ack(queue, receipts)

    async def queue_nack(self, ctx: CallContext, queue: str, body: Body) -> dict[str, Any]:
        """Give back the leased messages whose receipts ``body`` lists, redelivered after its
        ``delay_ms``: how many, and the receipts that matched no lease."""
        queue = await self._settling(ctx, queue)
        receipts, delay_ms = parse_receipts(await body(), nack=True)
        return await self.node.queues.nack(queue, receipts, delay_ms)

    async def queue_state(self, ctx: CallContext, queue: str) -> dict[str, Any]:
        """``queue``'s delivery state per partition, to a caller who may describe it."""
        queue = validate_name(queue, internal=True)
        await self.authorize(ctx, queue, OPERATIONS["queue_state"][0])
        return self.node.queues.describe(queue)

    async def _settling(self, ctx: CallContext, queue: str) -> str:
        """``queue``'s name checked and the caller authorized to settle its messages (no quota, not
        metered: a settle moves no message)."""
        queue = validate_name(queue, internal=True)
        await self.authorize(ctx, queue, OPERATIONS["queue_settle"][0])
        return queue

    # ---- consumer groups ---------------------------------------------------------------------

    async def group_join(self, ctx: CallContext, group: str,
                         request: Callable[[], Awaitable[JoinRequest]]) -> dict[str, Any]:
        """Join ``group`` as ``request`` asks (read and decoded by the protocol, once the caller
        may read the group): a new generation, and the member's view."""
        node = self.node
        group = await self.authorize_group(ctx, group, GROUP_OPERATIONS["group_join"])
        join = await request()
        await self.authorize_each(ctx, join.topics, "read")
        groups = await self._groups()
        if not groups.has_member(group, join.member_id):  # a new member counts against the caller's limit
            check_member_limit(ctx.principal, ctx.limits, groups.members_of(ctx.principal.name))
        await node.group_access.claim(ctx.principal, group, ctx.limits)
        groups = await self._groups()  # again after the claim's await: the coordinator may have moved meanwhile
        return await groups.join(group, join, ctx.principal.name, member_caller(ctx))

    async def group_heartbeat(self, ctx: CallContext, group: str, member: str) -> dict[str, Any]:
        """A member's heartbeat: its generation and assignment."""
        group = await self.authorize_group(ctx, group, GROUP_OPERATIONS["group_heartbeat"])
        return await (await self._groups()).heartbeat(group, member_id(member), member_caller(ctx))

    async def group_leave(self, ctx: CallContext, group: str, member: str) -> None:
        """A member leaves (a new generation)."""
        group = await self.authorize_group(ctx, group, GROUP_OPERATIONS["group_leave"])
        await (await self._groups()).leave(group, member_id(member), member_caller(ctx))

    async def group_commit(self, ctx: CallContext, group: str,
                           request: Callable[[], Awaitable[CommitRequest]]) -> dict[str, Any]:
        """Commit the offsets ``request`` names (read and decoded by the protocol, once the caller
        may read the group), for a member or (without one) for a group that has none, whose first
        such commit claims it: what was committed."""
        node = self.node
        group = await self.authorize_group(ctx, group, GROUP_OPERATIONS["group_commit"])
        commit = await request()
        await self.authorize_each(ctx, (topic for topic, _, _ in commit.offsets), "read")
        if commit.member_id == STANDALONE:
            await node.group_access.claim(ctx.principal, group, ctx.limits)
        return await (await self._groups()).commit(group, commit, member_caller(ctx))

    async def _groups(self) -> GroupCoordinator:
        """This node's group coordinator, waited for (bounded) while it is loading the groups it
        was just made to coordinate (``routing.while_groups_start``)."""
        node = self.node
        return await while_groups_start(node.router, lambda: node.groups)

    async def authorize_group(self, ctx: CallContext, group: str, action: GroupAction) -> str:
        """``group``'s name checked and the caller authorized to do ``action`` to it (403, or 404
        for groups nobody may see): the checked name. A stream calls it when it opens."""
        group = group_name(group)
        auth = self.node.auth
        if auth.enabled:
            await self.node.group_access.authorize(ctx.principal, group, action)
        return group

    async def authorize_each(self, ctx: CallContext, topics: Iterable[str], action: Action) -> None:
        """Refuse unless the caller may do ``action`` to every topic of ``topics`` (in name order):
        a group call's topics, and a member stream's assignment when it opens and at its rechecks (HTTP and gRPC)."""
        if self.node.auth.enabled:
            for topic in sorted(set(topics)):
                await self.authorize(ctx, topic, action)

    async def _read(self, ctx: CallContext, topic: str, wait_ms: int, read: Callable[[int], Awaitable[R]],
                    answer: Callable[[R], Awaitable[Answered[T]]], *, long_poll_held: bool = False) -> T:
        action, kind = OPERATIONS["fetch"]
        topic = validate_name(topic, internal=True)
        await self.authorize(ctx, topic, action)
        assert kind is not None
        self._check_quota(ctx, kind)
        wait = ctx.wait_ms(wait_ms, self._clock())
        if wait > 0 and not long_poll_held:  # one of the caller's long-polls while it waits
            with self.long_polls_hold(ctx):
                got = await read(wait)
        else:
            got = await read(wait)
        answered = await answer(got)
        self._charge(ctx, kind, answered.size_bytes, self._metered(topic), answered.records, requests=1)
        return answered.value

    def _check_quota(self, ctx: CallContext, kind: QuotaKind) -> None:
        auth = self.node.auth
        if auth.enabled:  # usage is counted with auth off too; quotas are not
            auth.check_quota(ctx.principal, kind, ctx.limits)

    def _charge(self, ctx: CallContext, kind: QuotaKind, size_bytes: int, topic: str, records: int, *,
                requests: int) -> None:
        auth = self.node.auth
        auth.meter.charge(ctx.principal.name, kind, ctx.limits if auth.enabled else None, size_bytes,
                          topic=topic, records=records, requests=requests)

    def _metered(self, topic: str) -> str:
        """The topic usage is counted under: itself once it exists (after the call: a topic created
        on first use counts), else ``OTHER``, so calls naming made-up topics cannot fill the usage
        ledger with names."""
        return metered_topic(self.node, topic)



def _asked_partitions(body: object) -> int:
    """The partition count a body asks for (1 when it does not say; the node checks the body)."""
    value = body.get("partitions", 1) if isinstance(body, dict) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _check_not_internal(topic: str, why: str) -> None:
    if topic.startswith(INTERNAL_PREFIX):
        raise InvalidTopicError(f"{topic!r} is internal: {why}")


def metered_topic(node: Node, topic: str) -> str:
    """``topic`` when this node knows it, else ``OTHER`` (see ``BrokerApi._metered``)."""
    return topic if node.coordinator.cached_topic(topic) is not None else OTHER
