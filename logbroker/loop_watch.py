"""Notices when something holds the node's event loop, and says what it was.

Every request, shipment, lease keepalive and ISR decision of a node waits while one callback
runs, so a callback that runs for a quarter of a second is an outage of that length that no
other log line explains. The loop beats every ``BEAT_S``; each beat observes how late it ran in
``logbroker_event_loop_lag_seconds``. A watcher thread looks every ``HELD_S / 4``: once the next
beat is ``HELD_S / 2`` late, it judges the stall once, taking the loop thread's stack
(``sys._current_frames``), so that every stall of ``HELD_S`` or more that the process ran through
has one; the late beat logs a warning with how long the loop was held and that stack. When the
loop waits on something another thread holds (a log's lock while a compaction swap fsyncs under it),
its own stack names only the waiter, so the stacks of the process's other threads that are in the
project's code at that moment go with it (``others``, at most ``OTHER_THREADS_MAX``): the holder.

A process that was stopped (SIGSTOP) or not scheduled holds its loop without any callback to
blame: the watcher's own sleep overran while the process spent no CPU, or the loop ran again
before the watcher looked and the process spent under half the stall on CPU. Such a stall is
logged as ``paused``, without a stack. (A C call holding the GIL overruns the watcher's sleep too,
but spends CPU meanwhile: that is a hold, its stack marked ``stack_late``.) Invariants: the
watcher writes one attribute, a judgement named by the beat it followed, which the loop uses only
for that beat's stall; at most one stack is taken per stall; the thread ends within ``HELD_S`` of
``stop``, or of its loop's close.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Final

from prometheus_client import CollectorRegistry, Histogram

log = logging.getLogger(__name__)
BEAT_S: Final = 0.1
HELD_S: Final = 0.25
STACK_FRAMES: Final = 12
OTHER_THREADS_MAX: Final = 4
# The node's own packages, wherever they are installed (a source tree, or site-packages in the
# image): the directories beside this package's.
PROJECT_PACKAGES: Final = ("logbroker", "segments", "http_api", "coordinator", "internal_rpc", "kafka_api",
                           "grpc_api")
PROJECT_ROOTS: Final = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name) + os.sep
                             for name in PROJECT_PACKAGES)
LAG_BUCKETS_S: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def stack_summary(frame: FrameType | None, limit: int = STACK_FRAMES) -> list[str]:
    """``file:line function`` of the innermost ``limit`` frames, innermost first."""
    lines: list[str] = []
    while frame is not None and len(lines) < limit:
        code = frame.f_code
        lines.append(f"{'/'.join(code.co_filename.split('/')[-2:])}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return lines


def in_project(frame: FrameType | None, roots: tuple[str, ...] = PROJECT_ROOTS) -> bool:
    """True when some frame of this stack runs the project's own code (not only the standard
    library's or a dependency's: an idle executor worker waits in ``queue.get``)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(roots):
            return True
        frame = frame.f_back
    return False


def other_stacks(frames: dict[int, FrameType], skip: set[int], limit: int = OTHER_THREADS_MAX,
                 roots: tuple[str, ...] = PROJECT_ROOTS) -> dict[str, list[str]]:
    """The stacks of the threads in ``frames`` (``sys._current_frames()``) that run project code,
    by thread name, leaving out ``skip``; at most ``limit`` of them, those whose innermost frame is
    the project's first (a holder in the project's code, not a thread idle under a project frame)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    ours = [(ident, frame) for ident, frame in frames.items() if ident not in skip and in_project(frame, roots)]
    ours.sort(key=lambda item: not item[1].f_code.co_filename.startswith(roots))
    return {names.get(ident, str(ident)): stack_summary(frame) for ident, frame in ours[:limit]}


class LoopWatch:
    """Started on the loop it watches; ``stop`` ends the beats and the watcher thread (which also
    ends by itself once that loop is closed)."""

    def __init__(self, registry: CollectorRegistry, *, beat_s: float = BEAT_S, held_s: float = HELD_S,
                 clock: Callable[[], float] = time.monotonic, roots: tuple[str, ...] = PROJECT_ROOTS) -> None:
        self._beat_s = beat_s
        self._roots = roots
        self._held_s = held_s
        self._clock = clock
        self.lag = Histogram("logbroker_event_loop_lag_seconds", "How late the event loop ran a callback "
                             f"due every {beat_s:g} s (a held loop delays every request)", buckets=LAG_BUCKETS_S,
                             registry=registry)
        self._beat_at = clock()
        self._cpu_at = time.process_time()
        # The watcher's judgement of one stall, named by the beat it followed (one attribute, so
        # the loop reads a whole judgement or none): (beat_at, paused, stack, stack taken late,
        # the other threads' stacks).
        self._seen: tuple[float, bool, list[str] | None, bool, dict[str, list[str]]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = threading.get_ident()
        self._handle: asyncio.TimerHandle | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.stalls = 0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._beat_at, self._cpu_at = self._clock(), time.process_time()
        self._stopping.clear()
        self._handle = self._loop.call_later(self._beat_s, self._beat)
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=self._held_s)
            self._thread = None

    def _beat(self) -> None:
        now, cpu = self._clock(), time.process_time()
        late = max(0.0, now - self._beat_at - self._beat_s)
        beat_at, cpu_at, seen = self._beat_at, self._cpu_at, self._seen
        self._beat_at, self._cpu_at = now, cpu  # first: the watcher judges no stall that has ended
        assert self._loop is not None
        self._handle = self._loop.call_later(self._beat_s, self._beat)
        self.lag.observe(late)
        if late < self._held_s:
            return
        self.stalls += 1
        if seen is not None and seen[0] == beat_at:
            _, paused, stack, stack_late, others = seen
        else:  # the loop ran again before the watcher looked: did the process run meanwhile?
            paused, stack, stack_late, others = cpu - cpu_at < late / 2, None, False, {}
        fields: dict[str, object] = {"held_ms": round(late * 1000, 1), "paused": paused}
        if not paused:
            fields["stack"] = stack
            if stack_late:
                fields["stack_late"] = True  # taken once a C call let the GIL go: maybe past it
            if others:
                fields["others"] = others
        log.warning("event loop held", extra={"fields": fields})

    def _watch(self) -> None:
        interval = self._held_s / 4  # at least one look while a stall is between half and all of HELD_S
        woke, spent = self._clock(), time.process_time()
        while not self._stopping.wait(interval):
            loop = self._loop
            if loop is None or loop.is_closed():
                return
            now, cpu = self._clock(), time.process_time()
            overslept = now - woke - interval
            woke, spent, spent_before = now, cpu, spent
            beat_at, seen = self._beat_at, self._seen
            if now - beat_at - self._beat_s < self._held_s / 2 or (seen is not None and seen[0] == beat_at):
                continue  # no stall yet, or this one judged already
            if overslept >= self._held_s / 2 and cpu - spent_before < overslept / 2:
                self._seen = (beat_at, True, None, False, {})  # this thread did not run either, nor anything else
            else:
                frames = sys._current_frames()
                others = other_stacks(frames, {self._loop_thread, threading.get_ident()}, roots=self._roots)
                self._seen = (beat_at, False, stack_summary(frames.get(self._loop_thread)),
                              overslept >= self._held_s / 2, others)
