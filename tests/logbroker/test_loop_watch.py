"""The loop watch: a held loop is logged with the stack that held it; a stopped process is logged
as paused, without blaming a callback; an idle loop logs nothing. A node serves the lag metric."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest

from logbroker import loop_watch
from logbroker.loop_watch import HELD_S, PROJECT_ROOTS, LoopWatch, in_project, other_stacks, stack_summary
from tests.conftest import ROOT
from tests.support.http import Http
from tests.support.nodes import NodeProcess


def lag_count(registry: CollectorRegistry, series: str = "_count") -> float:
    name = "logbroker_event_loop_lag_seconds" + series
    return float(next(line for line in generate_latest(registry).decode().splitlines()
                      if line.startswith(name + " ")).split()[-1])


def held_too_long() -> None:
    time.sleep(HELD_S + 0.25)


async def watched(body, caplog, **options) -> tuple[LoopWatch, CollectorRegistry, list[logging.LogRecord]]:
    registry = CollectorRegistry()
    watch = LoopWatch(registry, **options)
    with caplog.at_level(logging.WARNING, logger="logbroker.loop_watch"):
        watch.start()
        try:
            await body()
        finally:
            watch.stop()
    return watch, registry, [r for r in caplog.records if r.getMessage() == "event loop held"]


def test_a_callback_that_holds_the_loop_is_logged_with_its_stack(caplog):
    async def body() -> None:
        await asyncio.sleep(0.15)
        held_too_long()
        await asyncio.sleep(0.15)

    _, registry, held = asyncio.run(watched(body, caplog))
    ours = [r.fields for r in held if any("held_too_long" in line for line in r.fields.get("stack") or [])]  # type: ignore[attr-defined]
    assert len(ours) == 1, [r.fields for r in held]  # type: ignore[attr-defined]
    assert ours[0]["held_ms"] >= (HELD_S + 0.1) * 1000 and ours[0]["paused"] is False
    assert any("test_loop_watch.py" in line for line in ours[0]["stack"])
    assert lag_count(registry) - lag_count(registry, '_bucket{le="0.25"}') >= 1  # a beat came over 0.25 s late


TESTS: tuple[str, ...] = (os.path.join(ROOT, "tests") + os.sep,)


def holds_the_lock(lock: threading.Lock, taken: threading.Event) -> None:
    with lock:
        taken.set()
        until = time.monotonic() + HELD_S + 0.25
        while time.monotonic() < until:  # the holder works (a process that spends CPU is not paused)
            sum(range(1000))


def test_a_loop_waiting_on_a_lock_names_the_thread_that_holds_it(caplog):
    lock, taken = threading.Lock(), threading.Event()
    holder = threading.Thread(target=holds_the_lock, args=(lock, taken), name="lock-holder")

    async def body() -> None:
        await asyncio.sleep(0.15)
        holder.start()
        taken.wait(5)
        with lock:  # the loop waits here
            pass
        await asyncio.sleep(0.15)

    _, _, held = asyncio.run(watched(body, caplog, roots=TESTS))  # the holder's code is the test's
    holder.join(5)
    fields = [r.fields for r in held if "lock-holder" in (r.fields.get("others") or {})]  # type: ignore[attr-defined]
    assert len(fields) == 1, [r.fields for r in held]  # type: ignore[attr-defined]
    assert fields[0]["paused"] is False
    assert any("body" in line for line in fields[0]["stack"])  # the waiter
    assert any("holds_the_lock" in line for line in fields[0]["others"]["lock-holder"])  # and the holder


def test_the_project_is_its_own_packages_and_idle_threads_are_not_others():
    assert os.path.join(os.path.dirname(loop_watch.__file__), "") in PROJECT_ROOTS
    assert all(root.endswith(os.sep) and not root.endswith("site-packages" + os.sep) for root in PROJECT_ROOTS)
    stop = threading.Event()
    idle = threading.Thread(target=stop.wait, name="idle")  # only the standard library on its stack
    registry = CollectorRegistry()
    watch = LoopWatch(registry)
    idle.start()

    async def started() -> None:
        watch.start()
        await asyncio.sleep(0.05)
        frames = sys._current_frames()
        assert watch._thread is not None
        assert in_project(frames[watch._thread.ident]), "the watcher runs the node's code"
        assert not in_project(frames[idle.ident])
        assert not in_project(sys._getframe()), "a test is not the node's code"
        assert in_project(sys._getframe(), roots=TESTS)
        others = other_stacks(frames, {threading.get_ident()})
        assert "idle" not in others and "loop-watch" in others
        assert other_stacks(frames, set(), limit=0) == {}
        watch.stop()

    try:
        asyncio.run(started())
    finally:
        stop.set()
        idle.join(5)


def gil_held_for(seconds: float) -> int:
    """How many ``range`` items one ``sum`` call (a C call that keeps the GIL) adds up in ``seconds``."""
    started, n = time.perf_counter(), 10**5
    while time.perf_counter() - started < 0.02:
        sum(range(n))
        n *= 2
    per_s = n / 2 / max(1e-6, (time.perf_counter() - started) / 2)
    return int(per_s * seconds)


def held_in_c_with_the_gil(items: int) -> None:
    sum(range(items))  # one C call that keeps the GIL
    time.sleep(0.05)  # still in this function when the watcher gets the GIL back


def test_a_c_call_holding_the_gil_is_a_hold_not_a_pause(caplog):
    """The watcher cannot run while the GIL is held, so its sleep overruns as in a stopped
    process; the CPU the process spent meanwhile tells the two apart."""
    items = gil_held_for(0.6)

    async def body() -> None:
        await asyncio.sleep(0.15)
        held_in_c_with_the_gil(items)
        await asyncio.sleep(0.15)

    _, _, held = asyncio.run(watched(body, caplog))
    ours = [r.fields for r in held if r.fields["held_ms"] >= 400]  # type: ignore[attr-defined]
    assert len(ours) == 1, [r.fields for r in held]  # type: ignore[attr-defined]
    assert ours[0]["paused"] is False and ours[0]["stack_late"] is True
    assert any("held_in_c_with_the_gil" in line for line in ours[0]["stack"])


def test_a_loop_that_is_never_held_logs_nothing_and_still_observes_its_beats(caplog):
    async def body() -> None:
        for _ in range(10):
            await asyncio.sleep(0.05)

    watch, registry, held = asyncio.run(watched(body, caplog))
    assert watch.stalls == 0 and held == []
    assert lag_count(registry) >= 3


def test_stop_ends_the_watcher_thread_and_the_beats():
    async def body() -> tuple[threading.Thread, float, float]:
        registry = CollectorRegistry()
        watch = LoopWatch(registry)
        watch.start()
        thread = watch._thread
        assert thread is not None and thread.is_alive()
        await asyncio.sleep(0.25)
        watch.stop()
        beats = lag_count(registry)
        await asyncio.sleep(0.3)
        return thread, beats, lag_count(registry)

    thread, beats, later = asyncio.run(body())
    assert not thread.is_alive() and beats >= 1 and later == beats


def test_the_stack_summary_is_innermost_first_and_bounded():
    def inner():
        return stack_summary(sys._getframe(), limit=2)

    lines = inner()
    assert len(lines) == 2
    assert lines[0].endswith(" inner") and lines[1].endswith(" test_the_stack_summary_is_innermost_first_and_bounded")
    assert lines[0].startswith("logbroker/test_loop_watch.py:")


STOPPED_CHILD = textwrap.dedent("""
    import asyncio, json, logging, sys, time
    from prometheus_client import CollectorRegistry
    from logbroker.loop_watch import LoopWatch

    class Out(logging.Handler):
        def emit(self, record):
            print(json.dumps(record.fields), flush=True)

    logging.getLogger("logbroker.loop_watch").addHandler(Out())

    def held_after_the_pause():
        time.sleep(0.45)

    async def main():
        watch = LoopWatch(CollectorRegistry())
        watch.start()
        print("ready", flush=True)
        last = time.monotonic()
        deadline = last + 3.0
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            if now - last > 0.5:  # it was stopped: hold the loop at once, before the watcher looks
                held_after_the_pause()
            last = time.monotonic()
        watch.stop()

    asyncio.run(main())
""")


def test_a_stopped_process_is_logged_as_paused_and_a_hold_right_after_it_as_a_hold():
    child = subprocess.Popen([sys.executable, "-c", STOPPED_CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        child.send_signal(signal.SIGSTOP)
        time.sleep(0.8)
        child.send_signal(signal.SIGCONT)
        out, _ = child.communicate(timeout=10)
    finally:
        child.kill()
        child.wait()
    held = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(held) == 2, out
    assert held[0]["paused"] is True and "stack" not in held[0] and held[0]["held_ms"] >= 600
    assert held[1]["paused"] is False and any("held_after_the_pause" in line for line in held[1]["stack"])


def test_a_node_serves_its_loop_lag(node: NodeProcess):
    time.sleep(0.2)  # a beat or two after start-up
    scraped = Http(node.url).call("GET", "/metrics").data.decode()
    counts = [line for line in scraped.splitlines() if line.startswith("logbroker_event_loop_lag_seconds_count")]
    assert counts and float(counts[0].split()[-1]) >= 1
