"""A small pool of threads for the HTTP layer's CPU-heavy work on records: checking a compressed or
large batch at produce (decompressing it and decoding its rows), decoding and rendering records
for JSON fetches and push streams.

On the event loop, decoding a large batch stops every other request for as long as it takes; in
the pool the loop keeps its turn (a thread running Python gives up the GIL every few milliseconds,
zstd and zlib release it while they run). Both the threads and the calls waiting for them are
bounded: past ``DECODES_WAITING_MAX`` a call gets 503 (retriable), not a place in an ever longer
line.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

from aiohttp import web

from http_api.stream_budget import STREAMS_MAX
from logbroker.errors import NotAvailableError

DECODE_THREADS: Final = 2
# Above the bound on open push streams (each waits for at most one piece), so streams alone never
# fill it; what waits holds only a reference to bytes its request already read.
DECODES_WAITING_MAX: Final = 2 * STREAMS_MAX
T = TypeVar("T")


class DecodePool:
    """Runs a pure function on one of the pool's threads (one owner: the app)."""

    def __init__(self, threads: int = DECODE_THREADS, waiting_max: int = DECODES_WAITING_MAX) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="logbroker-decode")
        self._waiting_max = waiting_max
        self._waiting = 0

    async def run(self, fn: Callable[..., T], *args: object, inline: bool = False) -> T:
        """``fn(*args)`` on a pool thread; on the calling loop itself when ``inline`` (work small
        enough that a thread hop would cost the loop more than the work)."""
        if inline:
            return fn(*args)
        if self._waiting >= self._waiting_max:
            raise NotAvailableError(f"{self._waiting} decodes are already waiting; retry later")
        self._waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        finally:
            self._waiting -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


DECODER: Final = web.AppKey("decoder", DecodePool)


async def decode_pool(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx`` entry: the app's pool, shut down (waiting for running calls) at cleanup."""
    app[DECODER] = DecodePool()
    yield
    app[DECODER].close()
