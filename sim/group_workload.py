"""The consumer-group part of a cluster schedule (``sim.cluster_run``): members of one group
consume the topic and commit, an observer reads the committed offsets back, through the nodes'
real group coordinator, under the same faults as the writers.

The group coordinator lives on the leader of ``__consumer_offsets`` partition 0; a call made at
another node goes where that node's router sends it (``Router.locate(GROUPS)``), as the HTTP API's
pass-on does.

- ``member``: joins (again after any refusal), heartbeats, reads each assigned partition from
  where it stands (the group's committed offset when it takes the partition up, else 0) through a
  live node, and commits the new position with the generation it joined in (``commit``: ok when
  the coordinator took every offset, ``info`` otherwise);
- ``observer``: reads the group's committed offsets once a second (``committed`` ok).

The chaos checker judges them (``commit_regressions``): no committed offset acknowledged, or read
back, is lower than one acknowledged or read back before the call began.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from logbroker.errors import NoLeaderError
from logbroker.groups.requests import CommitRequest, JoinRequest
from logbroker.node import Node
from logbroker.routing import GROUPS, Here
from segments.log import LogRead
from sim.schedule import Schedule

GROUP: Final = "g"
SESSION_TIMEOUT_MS: Final = 6_000
CONSUME_GAP_S: Final = (0.2, 0.8)
OBSERVE_GAP_S: Final = 1.0
READ_BYTES: Final = 1 << 16


class GroupWorkload:
    def __init__(self, schedule: Schedule, topic: str) -> None:
        self._s = schedule
        self._topic = topic
        self.running = True

    def _home(self, via: int) -> int | None:
        """Where ``via`` would pass a group call on to (``Router.locate(GROUPS)``, as the HTTP
        pass-on does; itself when it coordinates groups), None when its router refuses (no
        coordinator now, or one still starting) or names a node that is down."""
        try:
            where = self._s.nodes()[via].router.locate(GROUPS)
        except NoLeaderError:
            return None
        home = via if isinstance(where, Here) else where.node.node_id
        return home if home in self._s.alive() else None

    def _via(self) -> tuple[int, int] | None:
        alive = self._s.alive()
        if not alive:
            return None
        via = self._s.rng.choice(alive)
        home = self._home(via)
        return None if home is None else (via, home)

    async def member(self, name: str) -> None:
        s = self._s
        joined: dict[str, Any] | None = None
        positions: dict[int, int] = {}
        sequence = 0
        while self.running:
            await asyncio.sleep(s.rng.uniform(*CONSUME_GAP_S))
            route = self._via()
            if route is None:
                continue
            _, home = route
            kind, answer = await s.call(home, f"{name}-{'heartbeat' if joined else 'join'}", _join_or_beat, GROUP,
                                        self._topic, None if joined is None else joined["member_id"])
            if kind != "ok":
                s.event(f"{name} {'heartbeat' if joined else 'join'} at n{home} {kind} {answer}")
                joined = None  # join again: a new generation, positions from the committed offsets
                continue
            if joined is None or answer["generation"] != joined["generation"]:
                joined, positions = answer, {}
                s.event(f"{name} generation {answer['generation']} at n{home}: {answer['assignment']}")
            assigned = sorted(joined["assignment"].get(self._topic, ()))
            if not assigned:
                continue
            partition = s.rng.choice(assigned)
            if partition not in positions:
                kind, committed = await s.call(home, f"{name}-position", _committed, GROUP, self._topic, partition)
                if kind != "ok":
                    continue
                positions[partition] = committed if committed is not None else 0
            route = self._via()
            if route is None:
                continue
            via, _ = route
            kind, answer = await s.call(via, f"{name}-fetch", _fetch, self._topic, partition, positions[partition])
            if kind != "ok" or answer[0].next_offset <= positions[partition]:
                continue
            position = answer[0].next_offset
            sequence += 1
            offsets = [[partition, position]]
            begun = s.loop.time()
            request = CommitRequest(joined["member_id"], joined["generation"], ((self._topic, partition, position),),
                                    sequence)
            positions[partition] = position  # a consumer's position moves on whatever its commit's fate
            kind, answer = await s.call(home, f"{name}-commit", _commit, GROUP, request)
            taken = kind == "ok" and answer["committed"] == 1
            s.record("commit", "ok" if taken else "info", name, offsets=offsets, invoke_time=begun)
            s.event(f"{name} commit p{partition}@{position} at n{home} {'ok' if taken else f'{kind} {answer}'}")

    async def observer(self) -> None:
        s = self._s
        while self.running:
            route = self._via()
            if route is not None:
                _, home = route
                begun = s.loop.time()
                kind, answer = await s.call(home, "committed", _committed_offsets, GROUP, self._topic)
                if kind == "ok":
                    s.record("committed", "ok", "observer", offsets=answer, invoke_time=begun)
                s.event(f"observer at n{home} {kind} {answer}")
            await asyncio.sleep(OBSERVE_GAP_S)


async def _fetch(node: Node, topic: str, partition: int, offset: int) -> tuple[LogRead, int]:
    return await node.reads.fetch(topic, partition, offset, READ_BYTES, 0)


async def _join_or_beat(node: Node, group: str, topic: str, member_id: str | None) -> dict[str, Any]:
    if member_id is None:
        return await node.groups.join(group, JoinRequest((topic,), SESSION_TIMEOUT_MS, None, None), None)
    return await node.groups.heartbeat(group, member_id)


async def _committed(node: Node, group: str, topic: str, partition: int) -> int | None:
    return node.groups.committed(group, topic, partition)


async def _commit(node: Node, group: str, request: CommitRequest) -> dict[str, Any]:
    return await node.groups.commit(group, request)


async def _committed_offsets(node: Node, group: str, topic: str) -> list[list[int]]:
    return sorted([p, o] for t, p, o in node.groups.committed_offsets(group) if t == topic)
