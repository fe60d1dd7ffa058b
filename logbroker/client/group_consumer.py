"""``GroupConsumer``: a member of a consumer group (join, background heartbeats, polling of the
assigned partitions, commits, rebalance callbacks).

The server assigns partitions; a heartbeat task learns of new generations and the poll that
follows applies them (so the assignment only changes between polls, on the caller's task):
revoked partitions go to ``on_revoke``, new ones start at the group's committed offset (else
``auto_offset_reset``) and go to ``on_assign``. A commit on a stale generation fails with
``CommitFailedError`` (409) and the member moves to the new generation on its next poll: delivery
is at-least-once, and within one generation no partition is consumed by two members.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from logbroker.client.consumer import Consumer, OffsetReset
from logbroker.client.consumer_batch import ConsumerBatch, ConsumerRecord, SkippedRecords
from logbroker.client.core import Client
from logbroker.client.errors import LogBrokerError

log = logging.getLogger(__name__)
Partitions = list[tuple[str, int]]
Callback = Callable[[Partitions], Awaitable[None] | None]


class CommitFailedError(LogBrokerError):
    """The commit was refused: the member missed a rebalance (or left the group)."""


def _flatten(assignment: dict[str, list[int]]) -> Partitions:
    return sorted((t, p) for t, ps in assignment.items() for p in ps)


class GroupConsumer:
    def __init__(self, client: Client, group: str, topics: Sequence[str], *, session_timeout_ms: int = 10_000,
                 assignment_strategy: str | None = None, auto_offset_reset: OffsetReset = "earliest",
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 1000, max_bytes: int = 1 << 20,
                 wait_ms: int = 500, on_assign: Callback | None = None, on_revoke: Callback | None = None) -> None:
        self.client, self.group, self.topics = client, group, list(topics)
        self.session_timeout_ms, self.assignment_strategy = session_timeout_ms, assignment_strategy
        self.enable_auto_commit, self.auto_commit_interval_ms = enable_auto_commit, auto_commit_interval_ms
        self.on_assign, self.on_revoke = on_assign, on_revoke
        self._consumer = Consumer(client, max_bytes=max_bytes, wait_ms=wait_ms, auto_offset_reset=auto_offset_reset)
        self.member_id: str | None = None
        self.generation = -1
        self.heartbeat_interval_ms = session_timeout_ms // 3
        self._next: tuple[int, Partitions] | None = None
        self._rejoin = False
        self._committed: dict[tuple[str, int], int] = {}
        # Each commit's ``sequence``, so a late one never undoes a later one; from the clock (µs), so
        # they keep growing across restarts of a member that rejoins under its old id.
        self._commit_numbers = itertools.count(time.time_ns() // 1000)
        self._last_commit = time.monotonic()
        self._heartbeats: asyncio.Task[None] | None = None
        self._commits: set[asyncio.Task[Any]] = set()
        self._membership = asyncio.Lock()  # one assignment change at a time (poll, commit_async)

    async def start(self) -> GroupConsumer:
        await self._join()
        self._heartbeats = asyncio.get_running_loop().create_task(self._heartbeat_forever())
        return self

    async def __aenter__(self) -> GroupConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def assignment(self) -> Partitions:
        return self._consumer.assignment()

    async def _join(self) -> None:
        joined = await self.client.join_group(self.group, self.topics, session_timeout_ms=self.session_timeout_ms,
                                              assignment_strategy=self.assignment_strategy)
        self.member_id = joined["member_id"]
        self.heartbeat_interval_ms = int(joined["heartbeat_interval_ms"])
        self._rejoin = False
        await self._apply(int(joined["generation"]), _flatten(joined["assignment"]))

    async def _heartbeat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            if self._rejoin or self.member_id is None:
                continue
            try:
                beat = await self.client.heartbeat(self.group, self.member_id)
            except LogBrokerError as exc:
                if exc.status == 404:
                    self._rejoin = True
                elif not exc.retriable:
                    log.warning("heartbeat failed: %s", exc)
                continue
            if int(beat["generation"]) != self.generation:
                self._next = (int(beat["generation"]), _flatten(beat["assignment"]))

    async def _apply(self, generation: int, partitions: Partitions) -> None:
        old = set(self._consumer.assignment())
        revoked = sorted(old - set(partitions))
        if revoked and self.on_revoke is not None:
            await _call(self.on_revoke, revoked)
        added = sorted(set(partitions) - old)
        self._consumer.assign(partitions)
        self.generation = generation
        if added:
            described = await self.client.describe_group(self.group)
            committed = {(o["topic"], o["partition"]): o["committed_offset"] for o in described["offsets"]}
            for tp in added:
                if committed.get(tp) is not None:
                    self._consumer.seek(tp[0], tp[1], committed[tp])
                    self._committed[tp] = committed[tp]
        for tp in revoked:
            self._committed.pop(tp, None)
        if added and self.on_assign is not None:
            await _call(self.on_assign, added)

    async def _apply_pending_membership(self) -> None:
        async with self._membership:
            if self._rejoin:
                await self._join()
            next_, self._next = self._next, None
            if next_ is not None and next_[0] > self.generation:
                await self._apply(*next_)

    @property
    def skipped(self) -> collections.deque[SkippedRecords]:
        """Stored records the polls passed over because they cannot be decoded (``Consumer.skipped``)."""
        return self._consumer.skipped

    async def poll(self, *, timeout_ms: int | None = None) -> list[ConsumerRecord]:
        """Records of the assigned partitions (waits up to ``timeout_ms`` when there are none).
        Auto-commit, when on, commits what earlier polls returned."""
        await self._before_poll()
        return await self._consumer.poll(timeout_ms=timeout_ms)

    async def poll_batches(self, *, timeout_ms: int | None = None) -> list[ConsumerBatch]:
        """As ``poll``, one ``ConsumerBatch`` (columns) per partition that had records."""
        await self._before_poll()
        return await self._consumer.poll_batches(timeout_ms=timeout_ms)

    async def _before_poll(self) -> None:
        if self.enable_auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval_ms / 1000:
            with contextlib.suppress(LogBrokerError):
                await self.commit()
        await self._apply_pending_membership()

    async def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Commit ``offsets`` (default: the position after every record polled so far)."""
        self._last_commit = time.monotonic()
        todo = offsets if offsets is not None else self._consumer.positions()
        changed = [(t, p, o) for (t, p), o in sorted(todo.items()) if self._committed.get((t, p)) != o]
        if not changed or self.member_id is None:
            return
        try:
            answer = await self._commit(changed)
        except LogBrokerError as exc:
            if exc.code != "stale_generation":
                self._rejoin = self._rejoin or exc.status == 404
                if exc.status in (404, 409):
                    raise CommitFailedError(exc.status, exc.code, exc.detail, extra=exc.extra) from exc
                raise
            # A rebalance this member has not seen yet: move to the new generation, then commit the
            # partitions it still owns (their positions continue what it consumed itself).
            await self._refresh()
            owned = set(self._consumer.assignment())
            changed = [(t, p, o) for t, p, o in changed if (t, p) in owned]
            if not changed:
                raise CommitFailedError(exc.status, exc.code, exc.detail, extra=exc.extra) from exc
            try:
                answer = await self._commit(changed)
            except LogBrokerError as again:
                if again.status in (404, 409):
                    raise CommitFailedError(again.status, again.code, again.detail, extra=again.extra) from again
                raise
        # A partition a later commit of this member already wrote keeps that commit's offset.
        later = {(s["topic"], s["partition"]) for s in answer.get("superseded", ())}
        for t, p, o in changed:
            if (t, p) not in later:
                self._committed[(t, p)] = o

    async def _commit(self, offsets: list[tuple[str, int, int]]) -> dict[str, Any]:
        assert self.member_id is not None
        return await self.client.commit_offsets(self.group, self.member_id, self.generation, offsets,
                                                sequence=next(self._commit_numbers))

    async def sync(self) -> None:
        """Heartbeat now and move to the group's current generation (rejoining if removed)."""
        await self._refresh()

    async def _refresh(self) -> None:
        assert self.member_id is not None
        async with self._membership:
            try:
                beat = await self.client.heartbeat(self.group, self.member_id)
            except LogBrokerError as exc:
                if exc.status != 404:
                    raise
                await self._join()
                return
            if int(beat["generation"]) != self.generation:
                self._next = None
                await self._apply(int(beat["generation"]), _flatten(beat["assignment"]))

    def commit_async(self, offsets: dict[tuple[str, int], int] | None = None) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self.commit(offsets))
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)
        return task

    async def close(self) -> None:
        """Commit (with auto-commit on), stop heartbeating and leave the group."""
        await self._consumer.close()
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeats
            self._heartbeats = None
        if self._commits:
            await asyncio.gather(*self._commits, return_exceptions=True)
        if self.member_id is None:
            return
        if self.enable_auto_commit:
            with contextlib.suppress(LogBrokerError):
                await self.commit()
        with contextlib.suppress(LogBrokerError):
            await self.client.leave_group(self.group, self.member_id)
        self.member_id = None


async def _call(callback: Callback, partitions: Partitions) -> None:
    result = callback(partitions)
    if result is not None:
        await result
