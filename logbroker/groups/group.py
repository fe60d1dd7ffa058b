"""One consumer group's membership and assignment (pure: the clock is an argument, no I/O).

Protocol: every change of membership (join, leave, session timeout) or of the subscribed topics'
partition counts starts a new generation at once, with a new server-side assignment. Members
learn it from their next heartbeat (or from a 409 on commit). Invariants:

- ``generation`` only grows; within one generation no partition is assigned to two members;
- only a current member may heartbeat (else ``UnknownMemberError``: join again), and only a
  current member acting on the current generation may commit, and only partitions it owns
  (``StaleGenerationError`` / ``NotAssignedError``): a member that missed a rebalance is fenced;
- a member is acted on (heartbeat, leave, commit) only by the principal that joined it, or an
  admin (``Caller``; ``ForbiddenError``).

Concurrency: one instance is mutated from the event loop only, never across an ``await``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from logbroker.errors import (
    ForbiddenError,
    GroupNotEmptyError,
    InconsistentStrategyError,
    NotAssignedError,
    StaleGenerationError,
    UnknownMemberError,
)
from logbroker.groups.assignment import Assignment, Strategy, assign


@dataclasses.dataclass(slots=True)
class Member:
    member_id: str
    topics: tuple[str, ...]
    session_timeout_ms: int
    deadline_ms: int
    principal: str | None
    joined_generation: int

    def to_json(self, now_ms: int) -> dict[str, Any]:
        return {"member_id": self.member_id, "topics": list(self.topics),
                "session_timeout_ms": self.session_timeout_ms, "principal": self.principal,
                "expires_in_ms": max(0, self.deadline_ms - now_ms)}


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """Who acts on a member: its own principal (the one that joined) or an admin may."""

    name: str | None
    admin: bool = False

    def check(self, member: Member, group: str) -> None:
        if not (self.admin or member.principal is None or member.principal == self.name):
            raise ForbiddenError(f"member {member.member_id!r} of group {group!r} belongs to another user")


ANY_CALLER: Final = Caller(None, admin=True)
STANDALONE: Final = ""  # the member id of a commit made without joining (``check_commit``)


class Group:
    __slots__ = ("assignment", "generation", "members", "name", "partitions", "strategy")

    def __init__(self, name: str, *, generation: int = 0, strategy: Strategy = "range") -> None:
        self.name = name
        self.generation = generation
        self.strategy: Strategy = strategy
        self.members: dict[str, Member] = {}
        self.assignment: Assignment = {}
        self.partitions: dict[str, int] = {}

    @property
    def topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    def join(self, topics: Sequence[str], session_timeout_ms: int, strategy: Strategy | None,
             partitions: Mapping[str, int], now_ms: int, *, principal: str | None = None,
             member_id: str | None = None) -> Member:
        """Add a member (or update a known ``member_id``'s subscription) and rebalance. The first
        member of an empty group picks the strategy; later ones must ask for the same or none."""
        if strategy is not None and self.members and strategy != self.strategy:
            raise InconsistentStrategyError(
                f"group {self.name!r} uses the {self.strategy} strategy; this member asked for {strategy}")
        if strategy is not None and not self.members:
            self.strategy = strategy
        known = self.members.get(member_id) if member_id is not None else None
        if known is not None and known.topics == tuple(topics):
            known.session_timeout_ms = session_timeout_ms
            known.deadline_ms = now_ms + session_timeout_ms
            return known
        new_id = known.member_id if known is not None else uuid.uuid4().hex
        member = Member(new_id, tuple(topics), session_timeout_ms, now_ms + session_timeout_ms, principal,
                        self.generation + 1)
        self.members[new_id] = member
        self.rebalance(partitions)
        return member

    def member(self, member_id: str) -> Member:
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberError(f"member {member_id!r} is not in group {self.name!r}; join again")
        return member

    def heartbeat(self, member_id: str, now_ms: int, caller: Caller = ANY_CALLER) -> Member:
        member = self.member(member_id)
        caller.check(member, self.name)
        member.deadline_ms = now_ms + member.session_timeout_ms
        return member

    def leave(self, member_id: str, partitions: Mapping[str, int], caller: Caller = ANY_CALLER) -> None:
        caller.check(self.member(member_id), self.name)
        del self.members[member_id]
        self.rebalance(partitions)

    def expire(self, now_ms: int, partitions: Mapping[str, int]) -> list[str]:
        """Remove members whose session timed out; rebalance when any did. Returns their ids."""
        gone = [m.member_id for m in self.members.values() if m.deadline_ms <= now_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self.rebalance(partitions)
        return gone

    def needs_rebalance(self, partitions: Mapping[str, int]) -> bool:
        """True when a subscribed topic's partition count differs from the current assignment's."""
        return any(partitions.get(t, 0) != self.partitions.get(t, 0) for t in self.topics)

    def rebalance(self, partitions: Mapping[str, int]) -> None:
        """Start a new generation with a fresh assignment over ``partitions`` (topic -> count)."""
        self.generation += 1
        subscribed = {t: partitions.get(t, 0) for t in self.topics}
        self.partitions = {t: n for t, n in subscribed.items() if n > 0}
        subscriptions = {m.member_id: m.topics for m in self.members.values()}
        self.assignment = assign(self.strategy, subscriptions, self.partitions, self.assignment)

    def check_commit(self, member_id: str, generation: int, partitions: Sequence[tuple[str, int]],
                     caller: Caller = ANY_CALLER) -> None:
        """Fence a commit: the member must be current, on this generation and own each partition.
        A commit without a member (``STANDALONE``: a consumer that assigns itself partitions, such
        as a Spark query reporting its progress; Kafka's generation -1) is taken only while the
        group has no members, so it never overwrites what a member consumed."""
        if member_id == STANDALONE:
            if self.members:
                raise GroupNotEmptyError(f"group {self.name!r} has {len(self.members)} member(s): a commit without "
                                         "a member is only for a group with none (join it instead)")
            return
        caller.check(self.member(member_id), self.name)
        if generation != self.generation:
            raise StaleGenerationError(
                f"generation {generation} is stale: group {self.name!r} is at generation {self.generation}",
                generation=self.generation)
        owned = self.assignment.get(member_id, {})
        for topic, partition in partitions:
            if partition not in owned.get(topic, ()):
                raise NotAssignedError(f"{topic}/{partition} is not assigned to member {member_id!r} "
                                       f"in generation {self.generation}", generation=self.generation)

    def owner(self, topic: str, partition: int) -> str | None:
        for member_id, owned in self.assignment.items():
            if partition in owned.get(topic, ()):
                return member_id
        return None
