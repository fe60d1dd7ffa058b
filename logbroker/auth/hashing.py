"""Password hashing in lanes: a few scrypt threads shared so that no kind of work starves another.

scrypt costs tens of milliseconds of CPU by design, and the node hashes in ``threads`` threads off
the event loop. Jobs come in three kinds, each with a lane (decisions 0180, 0236):

| lane | work | threads at most | waiting at most |
|---|---|---|---|
| ``trusted`` | logins from a trusted (user, address) pair; an admin's user administration | all | 64 |
| ``untrusted`` | logins from a pair not trusted yet | 1 | 32 |
| ``own`` | users changing their own password (checking the current one, hashing the new) | 1 | 32 |

A free thread goes to the first waiting job in that order whose lane is under its thread bound,
so a login never queues behind password changes (it waits at most for one running hash to end),
and a flood of first-time logins or of password changes holds at most one thread each. A lane
whose waiting jobs are at their bound refuses one more at once (429 with ``Retry-After``). Jobs of
one lane run in the order they came. The lane a job ran in is counted per lane (``ran``).

Concurrency: called on the event loop only; the threads run nothing but the hashing function.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, Literal, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from logbroker.errors import TooManyRequestsError

Lane = Literal["trusted", "untrusted", "own"]
LANES_BY_PRIORITY: Final[tuple[Lane, ...]] = ("trusted", "untrusted", "own")
HASH_THREADS: Final = 2
RETRY_AFTER_S: Final = 1.0
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class LaneBound:
    threads: int
    waiting: int


def default_bounds(threads: int) -> dict[Lane, LaneBound]:
    return {"trusted": LaneBound(threads, 64), "untrusted": LaneBound(1, 32), "own": LaneBound(1, 32)}


class HashLanes:
    def __init__(self, threads: int = HASH_THREADS, bounds: dict[Lane, LaneBound] | None = None) -> None:
        assert threads > 0, threads
        self._threads = threads
        self._bounds = bounds or default_bounds(threads)
        assert set(self._bounds) == set(LANES_BY_PRIORITY), self._bounds
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="logbroker-scrypt")
        self._waiting: dict[Lane, deque[asyncio.Future[None]]] = {lane: deque() for lane in LANES_BY_PRIORITY}
        self.running: dict[Lane, int] = dict.fromkeys(LANES_BY_PRIORITY, 0)
        self.ran: dict[Lane, int] = dict.fromkeys(LANES_BY_PRIORITY, 0)
        self._busy = 0

    def waiting(self, lane: Lane) -> int:
        return sum(not turn.done() for turn in self._waiting[lane])

    async def run(self, lane: Lane, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a hashing thread once ``lane`` gets one; ``TooManyRequestsError`` at
        once when ``lane`` already has its bound of jobs waiting."""
        if self.waiting(lane) >= self._bounds[lane].waiting:
            raise TooManyRequestsError(f"too many password hashes waiting ({lane} lane)", retry_after_s=RETRY_AFTER_S)
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting[lane].append(turn)
        self._dispatch()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # granted, then cancelled before it ran
                self._finished(lane)
            raise
        job: Future[T] = self._executor.submit(fn, *args)
        job.add_done_callback(lambda _: _call_soon(loop, self._finished, lane))
        return await asyncio.wrap_future(job)

    def _dispatch(self) -> None:
        while self._busy < self._threads:
            lane = self._next_lane()
            if lane is None:
                return
            turn = self._waiting[lane].popleft()
            self.running[lane] += 1
            self.ran[lane] += 1
            self._busy += 1
            turn.set_result(None)

    def _next_lane(self) -> Lane | None:
        for lane in LANES_BY_PRIORITY:
            queue = self._waiting[lane]
            while queue and queue[0].done():  # its caller went away
                queue.popleft()
            if queue and self.running[lane] < self._bounds[lane].threads:
                return lane
        return None

    def _finished(self, lane: Lane) -> None:
        assert self.running[lane] > 0 and self._busy > 0, (lane, self.running, self._busy)
        self.running[lane] -= 1
        self._busy -= 1
        self._dispatch()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[Lane], None], lane: Lane) -> None:
    """From a hashing thread: run ``callback`` on the loop, unless the loop is gone (shutdown)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, lane)


class HashLaneCollector(Collector):
    """The lanes' figures at scrape time: jobs waiting and running per lane, and jobs run."""

    def __init__(self, lanes: HashLanes) -> None:
        self._lanes = lanes

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        waiting = GaugeMetricFamily("logbroker_password_hashes_waiting", "Password hashes waiting for a thread",
                                    labels=["lane"])
        running = GaugeMetricFamily("logbroker_password_hashes_running", "Password hashes running", labels=["lane"])
        ran = CounterMetricFamily("logbroker_password_hashes", "Password hashes run", labels=["lane"])
        for lane in LANES_BY_PRIORITY:
            waiting.add_metric([lane], self._lanes.waiting(lane))
            running.add_metric([lane], self._lanes.running[lane])
            ran.add_metric([lane], self._lanes.ran[lane])
        yield from (waiting, running, ran)
