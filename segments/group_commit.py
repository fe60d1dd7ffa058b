"""Group commit for the ``always`` flush policy: one fsync covers every append that arrived
while the previous fsync ran. The ``interval`` policy uses the same machinery to flush in the
background when a flush falls due (``flush_in_background``).

Appenders write with ``PartitionLog.append(..., flush=False)`` and then ``await
wait_durable(last_offset)``. At most one flush runs per log at a time, in the given executor (so
fsync never blocks the event loop); when it finishes, every waiter whose offset it covered is
released and, if others arrived meanwhile, the next flush starts at once. The number of waiters
is bounded (``waiters_max``); past it ``StorageBusyError`` tells the caller to back off.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import final

from segments.errors import StorageBusyError
from segments.log import PartitionLog

WAITERS_MAX_DEFAULT = 100_000


@final
class GroupCommit:
    __slots__ = ("_executor", "_log", "_task", "_waiters", "_waiters_max", "flushes")

    def __init__(self, log: PartitionLog, executor: Executor | None, *, waiters_max: int = WAITERS_MAX_DEFAULT) -> None:
        self._log = log
        self._executor = executor
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._waiters_max = waiters_max
        self.flushes = 0

    async def wait_durable(self, offset: int) -> None:
        """Return once every record up to and including ``offset`` is on disk (fsync'd)."""
        if self._log.recovery_point > offset:
            return
        if len(self._waiters) >= self._waiters_max:
            raise StorageBusyError(f"{len(self._waiters)} appends already wait for a flush")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        await future

    def fail_from(self, offset: int, error: BaseException) -> None:
        """Fail the waiters for offsets at or past ``offset`` (the log was cut there: no flush
        will ever cover them)."""
        kept = []
        for waited, future in self._waiters:
            if waited >= offset and not future.done():
                future.set_exception(error)
            elif not future.done():
                kept.append((waited, future))
        self._waiters = kept

    def flush_in_background(self) -> None:
        """Start a flush in the executor unless one is running (the ``interval`` policy: its fsync
        must not run on the event loop, inside an append). Its error, if any, is left to the next
        flush (the node's maintenance round logs it); waiters arriving meanwhile are served."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(at_least_once=True))

    async def _run(self, *, at_least_once: bool = False) -> None:
        loop = asyncio.get_running_loop()
        while self._waiters or at_least_once:
            at_least_once = False
            try:
                durable = await loop.run_in_executor(self._executor, self._log.flush)
            except Exception as exc:
                waiters, self._waiters = self._waiters, []
                for _, future in waiters:
                    if not future.done():
                        future.set_exception(exc)
                return
            self.flushes += 1
            pending = []
            for offset, future in self._waiters:
                if future.done():
                    continue
                if durable > offset:
                    future.set_result(None)
                else:
                    pending.append((offset, future))
            self._waiters = pending
