"""A sub-millisecond tick for the paced sender.

An event loop's timers cannot wait half a millisecond: uvloop (libuv) keeps timers in whole
milliseconds and rounds ``asyncio.sleep(0.0005)`` down to zero, so a sender "sleeping" 0.5 ms spins
a whole core instead, and the standard loop rounds its selector timeout up to 1 ms. ``Ticker``
keeps the interval a thread's ``time.sleep`` can keep (a nanosleep) and wakes the loop once per
tick. At most one wake is pending: a loop that falls behind sees one tick, never a backlog.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType


class Ticker:
    """``await ticker.tick()`` returns at the next tick boundary (every ``interval_s`` from the start);
    use as ``with Ticker(interval_s) as ticker:`` so the thread stops when the block ends."""

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self._interval = interval_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending = False  # a wake is on its way to the loop (set by the thread, cleared on the loop)
        self.ticks = 0

    def __enter__(self) -> Ticker:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="paced-sender-ticker", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    async def tick(self) -> None:
        await self._event.wait()
        self._event.clear()

    def _run(self) -> None:
        assert self._loop is not None
        due = time.perf_counter()
        while not self._stop.is_set():
            due += self._interval
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            else:
                due = time.perf_counter()  # behind: the next tick is one interval from now
            self.ticks += 1
            if self._pending:
                continue
            self._pending = True
            try:
                self._loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the loop closed under us
                return

    def _wake(self) -> None:
        self._pending = False
        self._event.set()
