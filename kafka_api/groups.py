"""Kafka's consumer-group APIs on the node that coordinates groups: FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup (the classic protocol, ``kafka_api.group_state``: the broker
relays, the clients assign) and OffsetCommit / OffsetFetch on the broker's own committed offsets
(``__consumer_offsets``, the ones ``GET /v1/groups/{group}`` shows).

A group is a LogBroker group as a resource: the first join or commit claims it for the caller, and
others need a ``read`` grant on it (GROUP_AUTHORIZATION_FAILED); a member is acted on only by the
user that joined it; committing needs ``read`` on the topic. Members count against the user's
``group_members_max``. On a cluster every group call goes to the node FindCoordinator names (the
one that coordinates groups, as for HTTP); another node answers NOT_COORDINATOR.

Bounds: ``GROUPS_MAX`` Kafka groups on the node, ``MEMBERS_MAX`` members per group (group_state);
a join waits at most its rebalance timeout (capped at ``JOIN_WAIT_MAX_S``), a sync at most the
member's session timeout; one ticker ends join phases and expires sessions every ``TICK_S``.
Membership lives in memory: after a restart members join again, as after a coordinator move.

ListGroups and DescribeGroups show what the coordinator knows: the Kafka groups here (state,
protocol, members) and the groups the broker keeps (committed offsets, HTTP members; no Kafka
members to show). A caller sees only the groups it may ``describe`` (any grant); a grantee who
does not manage the group sees only its own members, as over HTTP. Bounds: a DescribeGroups names
at most ``GROUPS_PER_REQUEST_MAX`` groups (more closes the connection, as a Fetch naming too many
partitions); a ListGroups answer lists at most ``LISTED_MAX`` groups, the first by name."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from typing import Any, Final

from kafka_api import wire
from kafka_api.entities import BodyError
from kafka_api.group_state import (
    CLASSIC,
    DEAD_GROUP,
    HTTP_STATES,
    REBALANCE_TIMEOUT_MS_MAX,
    GroupSummary,
    JoinAnswer,
    KafkaGroup,
    filter_names,
    http_members,
    listed,
    stored_summary,
)
from kafka_api.session import Session, error_code, group_error_code
from logbroker.api import BrokerApi
from logbroker.auth.usage import check_member_limit
from logbroker.cluster_groups import ensure_offsets_topic
from logbroker.errors import ANY_ERROR
from logbroker.groups.group import ANY_CALLER, STANDALONE
from logbroker.groups.live import LiveGroup
from logbroker.groups.requests import CommitRequest, group_name
from logbroker.kafka_error_numbers import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_AUTHORIZATION_FAILED,
    INVALID_GROUP_ID,
    INVALID_REQUEST,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from logbroker.node import Node
from logbroker.routing import GROUPS, Here, Location

GROUPS_MAX: Final = 10_000
TICK_S: Final = 0.1
JOIN_WAIT_MAX_S: Final = REBALANCE_TIMEOUT_MS_MAX / 1000 + 5.0
GROUP_KEY: Final = 0
GROUPS_PER_REQUEST_MAX: Final = 1_000  # groups one DescribeGroups may name (handlers' PARTITIONS_PER_REQUEST_MAX)
LISTED_MAX: Final = 10_000  # groups one ListGroups answer lists
NO_OPERATIONS: Final = -(2**31)  # authorized operations not asked for
# Kafka's AclOperation codes a group has (READ, DELETE, DESCRIBE), as authorized_operations' bits.
READ_OPERATION, DELETE_OPERATION, DESCRIBE_OPERATION = 3, 6, 8


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class GroupHandlers:
    def __init__(self, node: Node, api: BrokerApi) -> None:
        self.node = node
        self.api = api
        self._groups: dict[str, KafkaGroup] = {}
        self._joins: dict[tuple[str, str], asyncio.Future[JoinAnswer]] = {}
        # per group, per member: a waiting SyncGroup's answer, an assignment or an error code
        self._syncs: dict[str, dict[str, asyncio.Future[bytes | int]]] = {}
        self._ticker: asyncio.Task[None] | None = None
        # members per user over every Kafka group here, kept as groups change (``_recount``)
        self._held: collections.Counter[str | None] = collections.Counter()
        self._counted: dict[str, collections.Counter[str | None]] = {}

    async def close(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker

    # ---- where ---------------------------------------------------------------------------------

    async def _coordinator(self) -> Location:
        """Where groups are coordinated (``Router.locate(GROUPS)``), ``__consumer_offsets``
        created first on a cluster's first group call."""
        await ensure_offsets_topic(self.node.coordinator, self.node.topics)
        return self.node.router.locate(GROUPS)

    async def find_coordinator(self, session: Session, request: Any) -> dict[str, Any]:
        keys = list(getattr(request, "coordinator_keys", ()) or ()) or [str(getattr(request, "key", ""))]
        key_type = int(getattr(request, "key_type", GROUP_KEY))
        found: dict[str, Any] = {"error_code": COORDINATOR_NOT_AVAILABLE, "error_message": None, "node_id": -1,
                                 "host": "", "port": -1}
        if key_type == GROUP_KEY:
            try:
                location = await self._coordinator()
            except ANY_ERROR as exc:
                found = {**found, "error_message": str(exc)[:200]}
            else:
                if isinstance(location, Here):
                    node_id, address = self.node.config.node_id, self.node.kafka_address
                else:
                    node_id, address = location.node.node_id, location.node.kafka_address
                where = wire.host_port(address)
                if where is not None:
                    found = {"error_code": NONE, "error_message": None, "node_id": node_id,
                             "host": where[0], "port": where[1]}
        return {"throttle_time": 0, **found, "coordinators": [{"key": str(k), **found} for k in keys]}

    async def _here(self, session: Session, group_id: str, *, claim: bool) -> tuple[str, int]:
        """The group's checked name and NONE, or an error code: not coordinated here, a bad name,
        or a caller without ``read`` on the group (a first ``claim`` makes it theirs)."""
        name, error = _checked_name(group_id)
        if error:
            return name, error
        error = await self._elsewhere()
        if error:
            return name, error
        ctx = session.context()
        access = self.node.group_access
        try:
            if claim:
                await access.claim(ctx.principal, name, ctx.limits)
            else:
                await access.authorize(ctx.principal, name, "read")
        except ANY_ERROR as exc:
            return name, group_error_code(exc)
        return name, NONE

    async def _elsewhere(self) -> int:
        """NONE when this node coordinates groups, else NOT_COORDINATOR (or COORDINATOR_NOT_AVAILABLE
        while no node does)."""
        try:
            return NONE if isinstance(await self._coordinator(), Here) else NOT_COORDINATOR
        except ANY_ERROR:
            return COORDINATOR_NOT_AVAILABLE

    def _owned(self, session: Session, group: KafkaGroup, member_id: str) -> bool:
        principal = session.context().principal
        owner = group.principal_of(member_id)
        return principal.is_admin or owner is None or owner == principal.name

    # ---- membership ------------------------------------------------------------------------------

    async def join_group(self, session: Session, request: Any) -> dict[str, Any]:
        member_id = str(request.member_id or "")
        name, error = await self._here(session, str(request.group_id), claim=True)
        group = self._groups.get(name)
        if not error and group is None and len(self._groups) >= GROUPS_MAX:
            error = COORDINATOR_NOT_AVAILABLE
        if not error and member_id and group is not None and not self._owned(session, group, member_id):
            error = GROUP_AUTHORIZATION_FAILED
        if not error and not member_id:
            ctx = session.context()
            try:
                check_member_limit(ctx.principal, ctx.limits, self._members_of(ctx.principal.name))
            except ANY_ERROR as exc:
                error = error_code(exc)
        if error:
            return _join_error(member_id, error)
        created = name not in self._groups
        group = self._groups.setdefault(name, KafkaGroup(name))
        protocols = [(str(p.name), bytes(p.metadata)) for p in request.protocols]
        rebalance_ms = int(getattr(request, "rebalance_timeout", request.session_timeout).total_seconds() * 1000)
        member_id, error = group.join(
            member_id, getattr(request, "group_instance_id", None), session.context().principal.name,
            str(request.protocol_type), protocols, int(request.session_timeout.total_seconds() * 1000),
            max(0, rebalance_ms), _now_ms(), client_id=session.client_id, client_host=_client_host(session))
        self._recount(group)
        if error:
            if created and not group.members:
                del self._groups[name]
            return _join_error(member_id, error)
        waiter: asyncio.Future[JoinAnswer] = asyncio.get_running_loop().create_future()
        previous = self._joins.pop((name, member_id), None)
        if previous is not None and not previous.done():
            previous.set_result(JoinAnswer(member_id, UNKNOWN_MEMBER_ID))
        self._joins[(name, member_id)] = waiter
        self._start_ticker()
        self._release_syncs(group)
        self._end_join_phase(group)
        try:  # the phase ends by its deadline (capped in group_state): this bound is only a backstop
            async with asyncio.timeout(JOIN_WAIT_MAX_S):
                answer = await waiter
        except TimeoutError:
            group.leave(member_id, _now_ms())  # no ghost member left holding partitions
            self._after_change(group)
            return _join_error(member_id, UNKNOWN_MEMBER_ID)
        finally:
            if self._joins.get((name, member_id)) is waiter:
                del self._joins[(name, member_id)]
        return {"throttle_time": 0, "error_code": answer.error_code, "generation_id": answer.generation,
                "protocol_type": group.protocol_type, "protocol_name": answer.protocol_name,
                "leader": answer.leader, "skip_assignment": False, "member_id": member_id,
                "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in answer.members]}

    def _members_of(self, principal: str) -> int:
        """The members ``principal`` holds in every group this node coordinates, Kafka's and HTTP's."""
        return self._held[principal] + self.node.groups.members_of(principal)

    def _recount(self, group: KafkaGroup) -> None:
        """Bring the per-user member counts up to date with ``group`` (O(its members))."""
        now = collections.Counter(m.principal for m in group.members.values())
        before = self._counted.pop(group.name, collections.Counter())
        self._held.update(now)
        self._held.subtract(before)
        for principal in before:
            if self._held[principal] <= 0:
                del self._held[principal]
        if now:
            self._counted[group.name] = now

    def _end_join_phase(self, group: KafkaGroup) -> None:
        if not group.join_ready(_now_ms()):
            return
        for answer in group.complete_join():
            waiter = self._joins.pop((group.name, answer.member_id), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(answer)

    async def sync_group(self, session: Session, request: Any) -> dict[str, Any]:
        member_id, generation = str(request.member_id), int(request.generation_id)
        name, error = await self._here(session, str(request.group_id), claim=False)
        group = self._groups.get(name)
        if not error:
            error = UNKNOWN_MEMBER_ID if group is None else \
                GROUP_AUTHORIZATION_FAILED if not self._owned(session, group, member_id) else NONE
        if not error:
            assert group is not None
            assignments = [(str(a.member_id), bytes(a.assignment)) for a in request.assignments]
            error = group.sync(member_id, generation, assignments, _now_ms())
        if error:
            return _sync(error)
        assert group is not None
        self._hand_out(group)
        assignment = group.assignment_of(member_id)
        if assignment is None:
            waiter: asyncio.Future[bytes | int] = asyncio.get_running_loop().create_future()
            self._syncs.setdefault(name, {})[member_id] = waiter
            timeout_s = group.members[member_id].session_timeout_ms / 1000
            try:
                async with asyncio.timeout(timeout_s):
                    got = await waiter
            except TimeoutError:
                return _sync(group.check(member_id, generation) or UNKNOWN_MEMBER_ID)
            finally:
                waiting = self._syncs.get(name, {})
                if waiting.get(member_id) is waiter:
                    del waiting[member_id]
                if not waiting:
                    self._syncs.pop(name, None)
            if isinstance(got, int):
                return _sync(got)
            assignment = got
        return {**_sync(NONE), "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "assignment": assignment}

    def _hand_out(self, group: KafkaGroup) -> None:
        """Answer the syncs waiting for the leader's assignments once it gave them."""
        for member_id in list(group.members):
            assignment = group.assignment_of(member_id)
            waiting = self._syncs.get(group.name, {})
            waiter = waiting.pop(member_id, None) if assignment is not None else None
            if waiter is not None and not waiter.done():
                waiter.set_result(assignment or b"")

    async def heartbeat(self, session: Session, request: Any) -> dict[str, Any]:
        name, error = await self._here(session, str(request.group_id), claim=False)
        group = self._groups.get(name)
        member_id = str(request.member_id)
        if not error:
            error = UNKNOWN_MEMBER_ID if group is None else \
                GROUP_AUTHORIZATION_FAILED if not self._owned(session, group, member_id) else \
                group.heartbeat(member_id, int(request.generation_id), _now_ms())
        return {"throttle_time": 0, "error_code": error}

    async def leave_group(self, session: Session, request: Any) -> dict[str, Any]:
        name, error = await self._here(session, str(request.group_id), claim=False)
        group = self._groups.get(name)
        leaving = [(str(m.member_id), m.group_instance_id) for m in getattr(request, "members", ())] or \
            [(str(getattr(request, "member_id", "")), None)]
        results = []
        for member_id, instance in leaving:
            code = error or (UNKNOWN_MEMBER_ID if group is None else
                             GROUP_AUTHORIZATION_FAILED if not self._owned(session, group, member_id) else
                             group.leave(member_id, _now_ms()))
            results.append({"member_id": member_id, "group_instance_id": instance, "error_code": code})
        if group is not None:
            self._after_change(group)
        top = error or (results[0]["error_code"] if len(results) == 1 else NONE)
        return {"throttle_time": 0, "error_code": top, "members": results}

    def _release_syncs(self, group: KafkaGroup) -> None:
        """Syncs waiting for an assignment that will not come (a new join phase began, or their
        member left) are answered REBALANCE_IN_PROGRESS (or UNKNOWN_MEMBER_ID): they join again."""
        if group.state == "completing":
            return
        for member_id, waiter in self._syncs.pop(group.name, {}).items():
            if not waiter.done():
                waiter.set_result(REBALANCE_IN_PROGRESS if member_id in group.members else UNKNOWN_MEMBER_ID)

    def _after_change(self, group: KafkaGroup) -> None:
        self._release_syncs(group)
        self._end_join_phase(group)
        self._recount(group)
        if not group.members and group.state == "empty" and not any(k[0] == group.name for k in self._joins):
            self._groups.pop(group.name, None)

    def _start_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.create_task(self._tick(), name="kafka-groups")

    async def _tick(self) -> None:
        """End join phases whose time is up and expire lapsed sessions, while any group exists."""
        while self._groups:
            await asyncio.sleep(TICK_S)
            now = _now_ms()
            for group in list(self._groups.values()):
                if group.expire(now) or group.state in ("preparing", "empty"):
                    self._after_change(group)

    # ---- listing ---------------------------------------------------------------------------------

    async def list_groups(self, session: Session, request: Any) -> dict[str, Any]:
        """The groups this node coordinates that the caller may describe, by name (another node
        coordinates none: an empty list, as a Kafka broker lists only its own groups; clients ask
        every broker)."""
        states = filter_names(str(s) for s in getattr(request, "states_filter", ()) or ())
        types = filter_names(str(t) for t in getattr(request, "types_filter", ()) or ())
        error = await self._elsewhere()
        if error:
            return _listing(NONE if error == NOT_COORDINATOR else error, [])
        stored, _ = self.node.groups.names_after(None, LISTED_MAX)
        names = sorted(set(self._groups) | set(stored))[:LISTED_MAX]
        kept = []
        for name in names:
            summary = self._summary(name)
            if listed(summary, states, types):
                kept.append((name, summary))
        principal = session.context().principal
        access = self.node.group_access
        if access.enabled and not principal.is_admin:
            visible = []
            for name, summary in kept:
                try:
                    await access.authorize(principal, name, "describe")
                except ANY_ERROR as exc:
                    code = group_error_code(exc)
                    if code != GROUP_AUTHORIZATION_FAILED:
                        return _listing(code, [])
                else:
                    visible.append((name, summary))
            kept = visible
        return _listing(NONE, [{"group_id": name, "protocol_type": summary.protocol_type,
                                "group_state": summary.state, "group_type": CLASSIC} for name, summary in kept])

    async def describe_groups(self, session: Session, request: Any) -> dict[str, Any]:
        """Each group the request names, in its order: its state, protocol and members; an unknown
        group is Dead (error NONE, as Kafka answers), one the caller may not describe
        GROUP_AUTHORIZATION_FAILED (the same for an unknown one, to all but admins: a name says
        nothing of whether another user's group exists)."""
        if len(request.groups) > GROUPS_PER_REQUEST_MAX:
            raise BodyError(f"a DescribeGroups naming more than {GROUPS_PER_REQUEST_MAX} groups")
        wants_operations = bool(getattr(request, "include_authorized_operations", False))
        elsewhere = await self._elsewhere()
        principal = session.context().principal
        access = self.node.group_access
        groups = []
        for group_id in request.groups:
            name, error = _checked_name(str(group_id))
            error = error or elsewhere
            record = None
            if not error:
                try:
                    record = await access.authorize(principal, name, "describe")
                except ANY_ERROR as exc:
                    error = group_error_code(exc)
            if error:
                groups.append({"error_code": error, "group_id": str(group_id), "group_state": "",
                               "protocol_type": "", "protocol_data": "", "members": [],
                               "authorized_operations": NO_OPERATIONS})
                continue
            manager = access.is_manager(principal, record)
            summary = self._summary(name)
            members = [m for m in summary.members if manager or m.principal == principal.name]
            groups.append({
                "error_code": NONE, "group_id": name, "group_state": summary.state,
                "protocol_type": summary.protocol_type, "protocol_data": summary.protocol_name,
                "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                             "client_host": m.client_host, "member_metadata": m.metadata,
                             "member_assignment": m.assignment} for m in members],
                "authorized_operations": _operations(manager) if wants_operations else NO_OPERATIONS})
        return {"throttle_time": 0, "groups": groups}

    def live(self, name: str, now_ms: int) -> LiveGroup | None:
        """The Kafka group ``name`` as ``GET /v1/groups`` shows it beside the broker's own groups
        (``logbroker.groups.live``); None when no Kafka group of that name is here."""
        group = self._groups.get(name)
        if group is None or not group.members:
            return None
        strategy = group.protocol_name if group.state == "stable" else None
        return LiveGroup(HTTP_STATES[group.state], group.generation, strategy, http_members(group, now_ms))

    def _summary(self, name: str) -> GroupSummary:
        """The group as this coordinator knows it: its Kafka group, else the broker's (committed
        offsets, HTTP members), else Dead."""
        group = self._groups.get(name)
        if group is not None:
            return group.summary()
        stored = self.node.groups.summaries([name])
        return stored_summary(bool(stored[0]["members"])) if stored else DEAD_GROUP

    # ---- offsets ---------------------------------------------------------------------------------

    async def offset_commit(self, session: Session, request: Any) -> dict[str, Any]:
        member_id = str(getattr(request, "member_id", "") or "")
        generation = int(getattr(request, "generation_id_or_member_epoch", -1))
        name, error = await self._here(session, str(request.group_id), claim=not member_id)
        group = self._groups.get(name)
        if not error:
            if not member_id:
                error = UNKNOWN_MEMBER_ID if group is not None and group.members else NONE
            elif group is None:
                error = UNKNOWN_MEMBER_ID
            elif not self._owned(session, group, member_id):
                error = GROUP_AUTHORIZATION_FAILED
            else:
                error = group.check_commit(member_id, generation)
        topics: list[dict[str, Any]] = []
        offsets: list[tuple[str, int, int]] = []
        for topic in request.topics:
            topic_name = str(topic.name)
            code = error or await self._readable(session, topic_name)
            parts: list[dict[str, Any]] = []
            for part in topic.partitions:
                index, offset = int(part.partition_index), int(part.committed_offset)
                part_code = code or (INVALID_REQUEST if offset < 0 else NONE)
                parts.append({"partition_index": index, "error_code": part_code})
                if not part_code:
                    offsets.append((topic_name, index, offset))
            topics.append({"name": topic_name, "partitions": parts})
        if offsets:
            try:
                await self.node.groups.commit(name, CommitRequest(STANDALONE, -1, tuple(offsets)), ANY_CALLER)
            except ANY_ERROR as exc:
                failed = error_code(exc)
                for topic_answer in topics:
                    for part_answer in topic_answer["partitions"]:
                        part_answer["error_code"] = part_answer["error_code"] or failed
        return {"throttle_time": 0, "topics": topics}

    async def _readable(self, session: Session, topic: str) -> int:
        try:
            await self.api.authorize(session.context(), topic, "read")
        except ANY_ERROR as exc:
            return error_code(exc)
        return NONE

    async def offset_fetch(self, session: Session, request: Any) -> dict[str, Any]:
        name, error = await self._here(session, str(request.group_id), claim=False)
        topics = []
        if not error:
            groups = self.node.groups
            if request.topics is None:
                wanted: dict[str, list[int]] = {}
                for topic, partition, _ in groups.committed_offsets(name):
                    wanted.setdefault(topic, []).append(partition)
            else:
                wanted = {str(t.name): [int(p) for p in t.partition_indexes] for t in request.topics}
            for topic, partitions in wanted.items():
                code = await self._readable(session, topic)
                topics.append({"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": -1 if code else _or(groups.committed(name, topic, p)),
                     "committed_leader_epoch": -1, "metadata": "", "error_code": code} for p in partitions]})
        return {"throttle_time": 0, "topics": topics, "error_code": error}


def _checked_name(group_id: str) -> tuple[str, int]:
    try:
        return group_name(group_id), NONE
    except ANY_ERROR:  # InvalidTopicError, as for a topic's name
        return group_id, INVALID_GROUP_ID


def _client_host(session: Session) -> str:
    """The member's address as Kafka shows it (``InetAddress.toString`` without a host name)."""
    return f"/{session.address}" if session.address else ""


def _operations(manager: bool) -> int:
    """DescribeGroups' ``authorized_operations``: a caller who may describe a group may read it
    (``read`` is the only grant); its owner and admins may delete it too."""
    operations = (READ_OPERATION, DESCRIBE_OPERATION) + ((DELETE_OPERATION,) if manager else ())
    return sum(1 << op for op in operations)


def _listing(error: int, groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "groups": groups}


def _or(offset: int | None) -> int:
    return -1 if offset is None else offset


def _join_error(member_id: str, error: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}


def _sync(error: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "protocol_type": None, "protocol_name": None,
            "assignment": b""}

