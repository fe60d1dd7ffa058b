"""One Kafka consumer group's membership under Kafka's classic group protocol (pure: the clock is
an argument, no I/O, no asyncio). The broker relays and the clients assign: members join with the
protocols (assignors) they support and their metadata; when every member expected has joined (or
the rebalance timeout passes), a generation begins, the first member to join is its leader and
receives everyone's metadata; the leader's SyncGroup carries each member's assignment, which the
others' SyncGroup calls receive.

States (Kafka's ``GroupState``): ``empty`` → ``preparing`` (a rebalance: joins are collected) →
``completing`` (a generation, waiting for the leader's assignments) → ``stable``; any join of a new
member, leave or session expiry goes back to ``preparing``. Invariants:

- ``generation`` only grows, by one per completed join phase;
- the answers a join phase gives name the same generation, leader and protocol to every member,
  and the protocol is one every member supports;
- an assignment is handed out only for the generation it was made for, and only by its leader;
- a heartbeat, sync or commit of an unknown member is UNKNOWN_MEMBER_ID, of another generation
  ILLEGAL_GENERATION, and during a join phase REBALANCE_IN_PROGRESS (the member joins again).

The shell (``kafka_api.groups``) holds the waiting calls; this class says who is answered what,
and how ListGroups and DescribeGroups show a group (``summary``, ``listed``: Kafka's state names,
its metadata and assignments only once a generation is stable, as Kafka's ``GroupMetadata.summary``).
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

from logbroker.kafka_error_numbers import (
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

State = Literal["empty", "preparing", "completing", "stable"]
MEMBERS_MAX: Final = 1_000
SESSION_TIMEOUT_MS_MIN: Final = 1_000
SESSION_TIMEOUT_MS_MAX: Final = 300_000
REBALANCE_TIMEOUT_MS_MAX: Final = 300_000  # a join phase ends by then, whatever its members ask
PROTOCOLS_MAX: Final = 20
# Kafka's names for the states (``GroupState.toString``), as ListGroups and DescribeGroups give them.
STATE_NAMES: Final[dict[State, str]] = {"empty": "Empty", "preparing": "PreparingRebalance",
                                        "completing": "CompletingRebalance", "stable": "Stable"}
EMPTY: Final = "Empty"
STABLE: Final = "Stable"
DEAD: Final = "Dead"  # a group the coordinator does not know
CLASSIC: Final = "classic"  # ListGroups' group type: every group here speaks the classic protocol


@dataclasses.dataclass(slots=True)
class KafkaMember:
    member_id: str
    instance_id: str | None
    principal: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (assignor name, metadata), in the member's order
    session_timeout_ms: int
    rebalance_timeout_ms: int
    deadline_ms: int
    joined: bool = False  # joined in the current join phase
    assignment: bytes = b""
    client_id: str = ""  # as DescribeGroups shows the member
    client_host: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSummary:
    """A member as DescribeGroups shows it (``principal``: whose it is, for who may see it)."""

    member_id: str
    instance_id: str | None
    principal: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group as DescribeGroups shows it: Kafka's state name, protocol type, the chosen protocol
    ("" until a generation is stable) and members."""

    state: str
    protocol_type: str = ""
    protocol_name: str = ""
    members: tuple[MemberSummary, ...] = ()


DEAD_GROUP: Final = GroupSummary(DEAD)


@dataclasses.dataclass(frozen=True, slots=True)
class JoinAnswer:
    member_id: str
    error_code: int
    generation: int = -1
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # for the leader only: (id, instance, metadata)


class KafkaGroup:
    def __init__(self, name: str) -> None:
        self.name = name
        self.state: State = "empty"
        self.generation = 0
        self.protocol_type = ""
        self.protocol_name: str | None = None
        self.leader = ""
        self.members: dict[str, KafkaMember] = {}
        self.join_deadline_ms = 0  # when a join phase ends even without every member

    # ---- join ----------------------------------------------------------------------------------

    def join(self, member_id: str, instance_id: str | None, principal: str | None, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
             now_ms: int, *, client_id: str = "", client_host: str = "") -> tuple[str, int]:
        """Take a join: (the member's id, an error code). With no error the call waits for the join
        phase to end (``join_complete``). ``client_id`` and ``client_host`` are only shown
        (DescribeGroups), as of the member's latest join."""
        if not SESSION_TIMEOUT_MS_MIN <= session_timeout_ms <= SESSION_TIMEOUT_MS_MAX:
            return member_id, INVALID_SESSION_TIMEOUT
        if not protocols or len(protocols) > PROTOCOLS_MAX:
            return member_id, INCONSISTENT_GROUP_PROTOCOL
        if self.members and (protocol_type != self.protocol_type
                             or not self._common({n for n, _ in protocols}, exclude=member_id)):
            return member_id, INCONSISTENT_GROUP_PROTOCOL
        if member_id and member_id not in self.members:
            return member_id, UNKNOWN_MEMBER_ID
        if not member_id:
            if len(self.members) >= MEMBERS_MAX:
                return member_id, GROUP_MAX_SIZE_REACHED
            member_id = f"{(instance_id or 'member')[:40]}-{uuid.uuid4()}"
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = KafkaMember(
                member_id, instance_id, principal, protocol_type, tuple(protocols), session_timeout_ms,
                rebalance_timeout_ms, now_ms + session_timeout_ms)
        else:
            member.protocols, member.session_timeout_ms = tuple(protocols), session_timeout_ms
            member.rebalance_timeout_ms, member.deadline_ms = rebalance_timeout_ms, now_ms + session_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        self.protocol_type = protocol_type
        if self.state != "preparing":
            self._prepare(now_ms)
        member.joined = True
        return member_id, NONE

    def _prepare(self, now_ms: int) -> None:
        self.state = "preparing"
        for member in self.members.values():
            member.joined = False
            member.assignment = b""
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.join_deadline_ms = now_ms + min(timeout, REBALANCE_TIMEOUT_MS_MAX)

    def join_ready(self, now_ms: int) -> bool:
        """Whether the join phase can end: every member joined again, or its time is up."""
        return self.state == "preparing" and bool(self.members) and (
            all(m.joined for m in self.members.values()) or now_ms >= self.join_deadline_ms)

    def complete_join(self) -> list[JoinAnswer]:
        """End the join phase: members that did not join again are dropped, a generation begins;
        the answer to each member's waiting join."""
        for member_id in [m for m, member in self.members.items() if not member.joined]:
            del self.members[member_id]
        if not self.members:
            self.state = "empty"
            self.generation += 1
            return []
        self.generation += 1
        self.state = "completing"
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.protocol_name = self._chosen()
        everyone = tuple((m.member_id, m.instance_id, dict(m.protocols)[self.protocol_name])
                         for m in self.members.values())
        return [JoinAnswer(m, NONE, self.generation, self.protocol_name, self.leader,
                           everyone if m == self.leader else ()) for m in self.members]

    def _common(self, names: set[str], exclude: str = "") -> set[str]:
        for member in self.members.values():
            if member.member_id != exclude:
                names &= {n for n, _ in member.protocols}
        return names

    def _chosen(self) -> str:
        """The protocol every member supports that the most members list first (Kafka's vote), ties
        to the leader's order."""
        common = self._common({n for n, _ in self.members[self.leader].protocols})
        votes = {name: 0 for name in common}
        for member in self.members.values():
            first = next(n for n, _ in member.protocols if n in common)
            votes[first] += 1
        order = [n for n, _ in self.members[self.leader].protocols if n in common]
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    # ---- sync, heartbeat, leave, commit ---------------------------------------------------------

    def check(self, member_id: str, generation: int) -> int:
        """The error (or NONE) for a call of ``member_id`` in ``generation``."""
        if member_id not in self.members:
            return UNKNOWN_MEMBER_ID
        if self.state == "preparing":
            return REBALANCE_IN_PROGRESS
        if generation != self.generation:
            return ILLEGAL_GENERATION
        return NONE

    def check_commit(self, member_id: str, generation: int) -> int:
        """The error (or NONE) for an offset commit: as Kafka, a commit of the current generation
        stands while a join phase collects members (it is what a member does before it rejoins),
        and waits out the assignment (REBALANCE_IN_PROGRESS) while the leader has not given it."""
        if member_id not in self.members:
            return UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ILLEGAL_GENERATION
        return REBALANCE_IN_PROGRESS if self.state == "completing" else NONE

    def sync(self, member_id: str, generation: int, assignments: Sequence[tuple[str, bytes]], now_ms: int) -> int:
        """Take a SyncGroup; with no error the caller waits for ``assignment_of`` (the leader's
        call brings everyone's assignment and ends the phase)."""
        error = self.check(member_id, generation)
        if error:
            return error
        self.heartbeat(member_id, generation, now_ms)
        if member_id == self.leader and self.state == "completing":
            for target, assignment in assignments:
                if target in self.members:
                    self.members[target].assignment = assignment
            self.state = "stable"
        return NONE

    def assignment_of(self, member_id: str) -> bytes | None:
        """The member's assignment once the leader gave them (None: not yet)."""
        if self.state != "stable" or member_id not in self.members:
            return None
        return self.members[member_id].assignment

    def heartbeat(self, member_id: str, generation: int, now_ms: int) -> int:
        error = self.check(member_id, generation)
        member = self.members.get(member_id)
        if member is not None:
            member.deadline_ms = now_ms + member.session_timeout_ms
        return error

    def leave(self, member_id: str, now_ms: int) -> int:
        if member_id not in self.members:
            return UNKNOWN_MEMBER_ID
        del self.members[member_id]
        self._rebalance_or_empty(now_ms)
        return NONE

    def expire(self, now_ms: int) -> list[str]:
        """Drop the members whose session lapsed (a member waiting in a join phase is kept until
        the phase ends); their ids."""
        gone = [m for m, member in self.members.items()
                if member.deadline_ms <= now_ms and not (self.state == "preparing" and member.joined)]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self._rebalance_or_empty(now_ms)
        return gone

    def _rebalance_or_empty(self, now_ms: int) -> None:
        if not self.members:
            self.state = "empty"
            self.leader = ""
        elif self.state != "preparing":
            self._prepare(now_ms)

    def principal_of(self, member_id: str) -> str | None:
        member = self.members.get(member_id)
        return None if member is None else member.principal

    # ---- views ---------------------------------------------------------------------------------

    def summary(self) -> GroupSummary:
        """The group as DescribeGroups shows it. As Kafka: the protocol and each member's metadata
        (for that protocol) and assignment only while stable; in a rebalance they are not settled,
        so members come without them."""
        stable = self.state == "stable" and self.protocol_name is not None
        members = tuple(
            MemberSummary(m.member_id, m.instance_id, m.principal, m.client_id, m.client_host,
                          dict(m.protocols).get(self.protocol_name or "", b"") if stable else b"",
                          m.assignment if stable else b"")
            for m in self.members.values())
        return GroupSummary(STATE_NAMES[self.state], self.protocol_type,
                            (self.protocol_name or "") if stable else "", members)


# The state names GET /v1/groups shows (the broker's own groups: "stable", "empty").
HTTP_STATES: Final[dict[str, str]] = {"empty": "empty", "preparing": "preparing-rebalance",
                                      "completing": "completing-rebalance", "stable": "stable"}
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


def consumer_assignment(data: bytes) -> dict[str, list[int]]:
    """The partitions a consumer-protocol assignment gives (Kafka's ``ConsumerProtocolAssignment``:
    version int16, then topics as int32 count of (int16-length name, int32 count of int32
    partitions)); {} for bytes that are not one. Counts are checked against the bytes left."""
    try:
        position = _I16.size
        (topics,) = _I32.unpack_from(data, position)
        position += _I32.size
        if not 0 <= topics <= (len(data) - position) // 6:
            return {}
        out: dict[str, list[int]] = {}
        for _ in range(topics):
            (length,) = _I16.unpack_from(data, position)
            position += _I16.size
            if not 0 <= length <= len(data) - position:
                return {}
            topic = data[position:position + length].decode("utf-8")
            position += length
            (count,) = _I32.unpack_from(data, position)
            position += _I32.size
            if not 0 <= count <= (len(data) - position) // _I32.size:
                return {}
            out[topic] = sorted(struct.unpack_from(f">{count}i", data, position))
            position += count * _I32.size
        return out
    except (struct.error, UnicodeDecodeError):
        return {}


def http_members(group: KafkaGroup, now_ms: int) -> list[dict[str, Any]]:
    """The group's members as GET /v1/groups/{group} shows a member, marked ``"protocol": "kafka"``,
    with the partitions their assignment names (none outside Stable)."""
    return [{"member_id": m.member_id, "protocol": "kafka", "principal": m.principal, "client_id": m.client_id,
             "client_host": m.client_host, "instance_id": m.instance_id, "session_timeout_ms": m.session_timeout_ms,
             "expires_in_ms": max(0, m.deadline_ms - now_ms),
             "assignment": consumer_assignment(m.assignment) if group.state == "stable" else {},
             "topics": sorted(consumer_assignment(m.assignment)) if group.state == "stable" else []}
            for m in group.members.values()]


def stored_summary(has_members: bool) -> GroupSummary:
    """A group the broker knows with no Kafka group here: only committed offsets (Empty, as Kafka
    lists a group that has only offsets), or members of LogBroker's own (HTTP) protocol, which
    Kafka's protocol cannot show: Stable, so that a tool that resets only an Empty group's offsets
    leaves an active group's alone."""
    return GroupSummary(STABLE if has_members else EMPTY)


def filter_names(names: Iterable[str]) -> frozenset[str]:
    """A ListGroups filter as ``listed`` takes it: names compare without case (librdkafka sends
    "Stable", "Classic"; Kafka's own names are "Stable", "classic"), made once per request so that
    each group costs one look-up whatever the filter's length."""
    return frozenset(name.lower() for name in names)


def listed(summary: GroupSummary, states: frozenset[str], types: frozenset[str]) -> bool:
    """Whether ListGroups' filters (``filter_names``) keep a group: an empty one keeps every group."""
    return (not states or summary.state.lower() in states) and (not types or CLASSIC in types)
