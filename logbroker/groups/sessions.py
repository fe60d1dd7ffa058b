"""Indexes that let the coordinator's periodic tick touch only the groups it must act on, so its
cost does not grow with the number of groups (pure: the clock is an argument, no I/O).

- Session deadlines: a min-heap of ``(deadline_ms, group, member_id)``. Invariant: every member
  has an entry no later than its deadline. An entry is pushed for a new member and for a rejoin
  that moved a deadline earlier (a shorter session timeout); a heartbeat only moves
  ``Member.deadline_ms`` later. An entry popped before its member's deadline is pushed again with
  it; one whose member is gone is dropped. Stale entries (members that left, duplicates) are
  bounded: the heap is rebuilt from the live members when they outnumber them (amortized O(1)).
- Subscriptions: topic -> groups with a member subscribed to it, so that a topic whose partition
  count changed puts only its groups on the queue of groups to check for a rebalance.
- Members: the count per group with members, and in all.

Invariant (``verify``): the indexes agree with the groups they were told about through
``changed``. Concurrency: mutated from the event loop only, never across an ``await``.
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Mapping
from typing import Final

from logbroker.groups.group import Group, Member

DEADLINES_SLACK: Final = 1_024  # stale heap entries tolerated beyond the live members' count


class Sessions:
    def __init__(self) -> None:
        self._deadlines: list[tuple[int, str, str]] = []
        self._members: dict[str, int] = {}  # group -> members, groups with members only
        self.members_live = 0
        self._subscribed: dict[str, frozenset[str]] = {}  # group -> topics its members subscribe to
        self._subscribers: dict[str, set[str]] = {}  # topic -> groups
        self._to_check: collections.deque[str] = collections.deque()
        self._checking: set[str] = set()

    # ---- told by the coordinator -------------------------------------------------------------

    def joined(self, group: str, member: Member) -> None:
        """A new member joined ``group``, or a known one's deadline moved earlier."""
        heapq.heappush(self._deadlines, (member.deadline_ms, group, member.member_id))

    def changed(self, group: Group) -> None:
        """``group``'s members changed (join, leave, expiry): update its counts and subscriptions.
        O(the group's members), never of the number of groups."""
        before = self._members.pop(group.name, 0)
        if group.members:
            self._members[group.name] = len(group.members)
        self.members_live += len(group.members) - before
        topics = frozenset(group.topics)
        old = self._subscribed.pop(group.name, frozenset())
        if topics:
            self._subscribed[group.name] = topics
        for topic in old - topics:
            subscribers = self._subscribers[topic]
            subscribers.discard(group.name)
            if not subscribers:
                del self._subscribers[topic]
        for topic in topics - old:
            self._subscribers.setdefault(topic, set()).add(group.name)

    def forget(self, name: str) -> None:
        """``name`` was deleted: drop it from every index (its heap entries and a queued check
        go stale: the tick skips a group it no longer knows)."""
        self.changed(Group(name))

    def topic_changed(self, topic: str) -> None:
        """``topic``'s partition count changed: queue its groups for a rebalance check."""
        for name in self._subscribers.get(topic, ()):
            if name not in self._checking:
                self._checking.add(name)
                self._to_check.append(name)

    # ---- read by the tick --------------------------------------------------------------------

    def due(self, now_ms: int, groups: Mapping[str, Group], limit: int) -> list[str]:
        """Names of groups with a member whose session lapsed by ``now_ms``, popping at most
        ``limit`` heap entries (the rest wait for the next call). Entries of members that
        heartbeated since are pushed again with their new deadline."""
        due: dict[str, None] = {}
        for _ in range(limit):
            if not self._deadlines or self._deadlines[0][0] > now_ms:
                break
            _, name, member_id = heapq.heappop(self._deadlines)
            group = groups.get(name)
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                continue
            if member.deadline_ms > now_ms:
                heapq.heappush(self._deadlines, (member.deadline_ms, name, member_id))
            else:
                due[name] = None
        return list(due)

    def to_check(self, limit: int) -> list[str]:
        """Up to ``limit`` groups queued by ``topic_changed``, oldest first."""
        names: list[str] = []
        while self._to_check and len(names) < limit:
            name = self._to_check.popleft()
            self._checking.discard(name)
            names.append(name)
        return names

    def compact(self, groups: Mapping[str, Group]) -> bool:
        """Rebuild the heap from the live members once stale entries outnumber them."""
        if len(self._deadlines) <= 2 * self.members_live + DEADLINES_SLACK:
            return False
        self._deadlines = [(m.deadline_ms, name, m.member_id)
                           for name in self._members for m in groups[name].members.values()]
        heapq.heapify(self._deadlines)
        return True

    @property
    def heap_entries(self) -> int:
        return len(self._deadlines)

    def verify(self, groups: Mapping[str, Group]) -> None:
        """Assert that the indexes agree with ``groups`` (tests; O(everything))."""
        members = {name: len(g.members) for name, g in groups.items() if g.members}
        assert self._members == members, (self._members, members)
        assert self.members_live == sum(members.values())
        subscribed = {name: frozenset(g.topics) for name, g in groups.items() if g.topics}
        assert self._subscribed == subscribed, (self._subscribed, subscribed)
        subscribers: dict[str, set[str]] = {}
        for name, topics in subscribed.items():
            for topic in topics:
                subscribers.setdefault(topic, set()).add(name)
        assert self._subscribers == subscribers, (self._subscribers, subscribers)
        earliest: dict[tuple[str, str], int] = {}
        for deadline, name, member_id in self._deadlines:
            earliest[name, member_id] = min(deadline, earliest.get((name, member_id), deadline))
        for name, group in groups.items():
            for member_id, member in group.members.items():
                assert earliest.get((name, member_id), member.deadline_ms + 1) <= member.deadline_ms, \
                    f"member {member_id} of {name} has no deadline entry at or before its deadline"
        assert set(self._to_check) == self._checking
