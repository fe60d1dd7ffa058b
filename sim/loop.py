"""A deterministic asyncio event loop on virtual time (FoundationDB's simulation, in asyncio).

The broker's own coroutines run unchanged; only the outside world is replaced. Invariants:

- ``time()`` is virtual. When no callback is ready the loop jumps to the earliest timer instead
  of sleeping, so a 10 s deadline costs no wall-clock time. Time never goes back.
- Callbacks run in asyncio's own order (ready callbacks FIFO, timers by due time, ties in the
  order the heap holds them), which depends only on what the program did before: one input, one
  order.
- No thread and no real I/O: ``run_in_executor`` runs its function inline, ``getaddrinfo`` and
  every socket, pipe or subprocess operation raise ``RealWorldError``. Connections go through the
  network the loop is given (``sim.network``).
- A run is bounded: past ``steps_max`` loop iterations or ``time_max_s`` of virtual time the loop
  raises ``SimBoundError``; when nothing is ready and no timer is set while something is still
  awaited, it raises ``SimStuckError`` (the awaited thing can never come).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import math
import selectors
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Executor
from typing import Any, Final, Protocol, TypeVar, TypeVarTuple

T = TypeVar("T")
# The simulated host the running code belongs to: a task inherits it from the code that starts it
# (``sim.network.SimNetwork.spawn`` sets it), so a host's tasks can be found and ended together.
CURRENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("sim_host", default="outside")
Ts = TypeVarTuple("Ts")
STEPS_MAX: Final = 5_000_000
TIME_MAX_S: Final = 7 * 24 * 3600.0
START_S: Final = 1000.0  # not 0: code that treats 0 as "never" stays honest


class SimError(Exception):
    """Something the simulation cannot or will not do."""


class RealWorldError(SimError):
    """Code under simulation reached for a real socket, thread, file descriptor or process."""


class SimStuckError(SimError):
    """Nothing is ready and no timer is set: whatever is awaited never comes."""


class SimBoundError(SimError):
    """The run went past its step or virtual-time bound (a livelock, or a schedule too long)."""


class Network(Protocol):
    """What the loop's ``create_connection`` and ``create_server`` hand over to (``sim.network``)."""

    async def connect(self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: Any, port: int | None,
                      **kwargs: Any) -> tuple[asyncio.Transport, asyncio.BaseProtocol]: ...

    async def listen(self, protocol_factory: Callable[[], asyncio.BaseProtocol], host: Any, port: int | None,
                     **kwargs: Any) -> asyncio.AbstractServer: ...


class _VirtualSelector(selectors.BaseSelector):
    """The loop's selector: holds no file descriptor; ``select(timeout)`` moves virtual time on."""

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        raise RealWorldError(f"a real file descriptor ({fileobj!r}) under simulation")

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        raise KeyError(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self._loop._advance(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return {}

    def close(self) -> None:
        pass


class SimLoop(asyncio.BaseEventLoop):
    """The event loop of one simulated run (one seed)."""

    def __init__(self, *, start_s: float = START_S, steps_max: int = STEPS_MAX,
                 time_max_s: float = TIME_MAX_S) -> None:
        super().__init__()
        self._now = start_s
        self._start_s = start_s
        self._steps_max = steps_max
        self._time_max_s = time_max_s
        self.steps = 0
        self._selector = _VirtualSelector(self)
        self._owner = threading.get_ident()
        self.network: Network | None = None
        self.errors: list[tuple[str, BaseException | None]] = []  # the exception handler's (message, exception)
        self.set_exception_handler(self._record_error)
        self._task_numbers: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
        self._task_hosts: weakref.WeakKeyDictionary[asyncio.Task[Any], str] = weakref.WeakKeyDictionary()
        self._next_task = itertools.count()
        self.set_task_factory(self._make_task)  # type: ignore[arg-type]

    def _make_task(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any],
                   context: Any = None) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, context=context)
        self._task_numbers[task] = next(self._next_task)
        self._task_hosts[task] = context.get(CURRENT_HOST, CURRENT_HOST.get()) if context is not None \
            else CURRENT_HOST.get()
        return task

    def tasks_of(self, host: str) -> list[asyncio.Task[Any]]:
        """The unfinished tasks started on ``host``, oldest first."""
        return [t for t in self.tasks_in_creation_order() if self._task_hosts.get(t) == host]

    def tasks_in_creation_order(self) -> list[asyncio.Task[Any]]:
        """The loop's unfinished tasks, oldest first (``asyncio.all_tasks`` is a set: its order
        follows memory addresses, which differ from one process to the next)."""
        return sorted(asyncio.all_tasks(self), key=lambda t: self._task_numbers.get(t, -1))

    # ---- time ----------------------------------------------------------------------------------

    def time(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[*Ts], object], *args: *Ts,
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        """A positive delay always moves the clock on, by one representable step at least: a
        delay below half a step of the float clock would land on the present, and code that
        sleeps the rest of an interval (``sleep(spacing - (now - last))``) would wake to the
        same time forever. Real time always passes; so does virtual time."""
        if delay > 0:
            when = max(self._now + delay, math.nextafter(self._now, math.inf))
            return self.call_at(when, callback, *args, context=context)
        return super().call_later(delay, callback, *args, context=context)

    def _advance(self, timeout: float | None) -> None:
        """One poll of the (absent) outside world: jump to the earliest timer."""
        self.steps += 1
        if self.steps > self._steps_max:
            raise SimBoundError(f"more than {self._steps_max} loop steps (a livelock?) at t={self._now:.6f}")
        if timeout is None:
            raise SimStuckError(f"nothing is ready and no timer is set at t={self._now:.6f}")
        if timeout <= 0:
            return
        target = self._now + timeout
        timers: list[asyncio.TimerHandle] = vars(self)["_scheduled"]  # BaseEventLoop's heap of timers
        if timers:  # land exactly on the timer, never a rounding error short of it
            target = max(target, timers[0].when())
        if target - self._start_s > self._time_max_s:
            raise SimBoundError(f"virtual time past {self._time_max_s:g} s")
        self._now = target

    # ---- no threads, no real I/O ---------------------------------------------------------------

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        if threading.get_ident() != self._owner:
            raise RealWorldError("a thread scheduled a callback on the simulated loop")

    def run_in_executor(self, executor: Executor | None, func: Callable[[*Ts], T],
                        *args: *Ts) -> asyncio.Future[T]:
        """Runs ``func`` now, on the loop (a thread pool would make the order depend on the OS)."""
        if self.is_closed():
            raise RuntimeError("Event loop is closed")
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    async def getaddrinfo(self, *args: Any, **kwargs: Any) -> Any:
        raise RealWorldError("name resolution under simulation")

    async def getnameinfo(self, *args: Any, **kwargs: Any) -> Any:
        raise RealWorldError("name resolution under simulation")

    def _network(self) -> Network:
        if self.network is None:
            raise RealWorldError("a connection under simulation, and the loop has no simulated network")
        return self.network

    async def create_connection(self, protocol_factory: Callable[[], asyncio.BaseProtocol],
                                host: str | None = None, port: int | None = None, **kwargs: Any) -> Any:
        return await self._network().connect(protocol_factory, host, port, **kwargs)

    async def create_server(self, protocol_factory: Callable[[], asyncio.BaseProtocol],
                            host: Any = None, port: int | None = None, **kwargs: Any) -> Any:
        return await self._network().listen(protocol_factory, host, port, **kwargs)

    # ---- errors --------------------------------------------------------------------------------

    def _record_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        self.errors.append((str(context.get("message", "")), exc if isinstance(exc, BaseException) else None))


def run(main: Coroutine[Any, Any, T], *, loop: SimLoop | None = None) -> T:
    """Run ``main`` to completion on ``loop`` (a new ``SimLoop`` by default), then close it the
    way ``asyncio.run`` does: cancel what is left, finish async generators."""
    loop = loop or SimLoop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            tasks = loop.tasks_in_creation_order()
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
