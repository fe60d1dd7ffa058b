"""The answers of one produce stream, in the order its messages came (decision 0296).

Each message's answer is a future (the task checking and appending it); the writer takes every
finished answer at the head at once, so answers ready together leave in one write, and an answer
never overtakes an earlier one. Invariants: at most ``limit`` answers wait (``put`` waits for room
beyond that, which stops the stream's reading: the client's sends back up in TCP); ``ready``
returns None only once the queue is closed and every answer was taken; ``drained`` returns once
every answer put before it was taken and the writer has asked for more (it has sent them).
"""

from __future__ import annotations

import asyncio
import collections
from typing import final


@final
class AnswerQueue:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._pending: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self._room = asyncio.Semaphore(limit)
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()  # set while the writer waits with nothing left to send
        self._closed = False

    def __len__(self) -> int:
        return len(self._pending)

    async def put(self, answer: asyncio.Future[bytes]) -> None:
        """Queue the next message's answer (waits while ``limit`` answers wait)."""
        await self._room.acquire()
        self._pending.append(answer)
        self._idle.clear()
        answer.add_done_callback(self._wake)
        self._changed.set()

    def idle(self) -> bool:
        """True when no answer waits and the writer has sent every one taken (it waits for more):
        an answer may then be sent by its producer directly, in order."""
        return not self._pending and self._idle.is_set()

    def close(self) -> None:
        """No more answers will be put; ``ready`` ends once those queued are taken."""
        self._closed = True
        self._changed.set()

    async def ready(self) -> list[bytes] | None:
        """The finished answers at the head (at least one), in order; None once closed and empty.
        An answer's future must not fail: the task behind it turns every error into an answer."""
        while True:
            taken = []
            while self._pending and self._pending[0].done():
                taken.append(self._pending.popleft().result())
                self._room.release()
            if taken:
                return taken
            if not self._pending:
                self._idle.set()
                if self._closed:
                    return None
            self._changed.clear()
            await self._changed.wait()

    async def drained(self) -> None:
        """Wait until every answer put so far has been taken and the writer is idle again."""
        if self._pending or not self._idle.is_set():
            await self._idle.wait()

    def _wake(self, _answer: asyncio.Future[bytes]) -> None:
        self._changed.set()
