"""A second client process for the scenarios that need one: the consumer side of the latency
runs (so sender and receiver do not share one event loop, as in PEERS.md) and the idle consumers.

The parent talks to it over a pipe: ``("latencies", log, count, seconds)`` and
``("idle", log, consumers)`` answer ``("ready",)`` once subscribed, then ``("result", value)``;
an idle hold ends on ``("stop",)``; ``("exit",)`` ends the process. A failure in the worker comes
back as ``("error", text)`` and is raised in the parent. Every wait on the pipe has a timeout, and
``close()`` ends the process by PID if it does not exit by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Final

from benchmarks.collector import collector_paused
from benchmarks.procstat import raise_open_files_limit
from benchmarks.servers import Endpoint

START_TIMEOUT_S: Final = 60.0
EXIT_TIMEOUT_S: Final = 15.0


class WorkerError(RuntimeError):
    """The worker process failed or did not answer in time."""


def _child(endpoint: Endpoint, conn: Connection) -> None:
    import uvloop

    uvloop.run(_serve(endpoint, conn))


async def _serve(endpoint: Endpoint, conn: Connection) -> None:
    from benchmarks.drivers import driver_for

    loop = asyncio.get_running_loop()
    try:
        driver = driver_for(endpoint)
        await driver.connect()
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("connected",))
    try:
        while True:
            message = await loop.run_in_executor(None, conn.recv)
            if message[0] == "exit":
                return
            try:
                conn.send(("result", await _one(driver, conn, message)))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    finally:
        await driver.close()


async def _one(driver: Any, conn: Connection, message: tuple[Any, ...]) -> Any:
    loop = asyncio.get_running_loop()
    if message[0] == "latencies":
        _, log, count, seconds = message
        with collector_paused():
            return await driver.receive_latencies(log, count, lambda: conn.send(("ready",)),
                                                  time.monotonic() + seconds)
    if message[0] == "idle":
        _, log, consumers = message
        raise_open_files_limit(consumers)
        stop = asyncio.Event()

        def ready() -> None:
            conn.send(("ready",))
            loop.run_in_executor(None, conn.recv).add_done_callback(lambda _f: stop.set())

        return await driver.hold_idle(log, consumers, ready, stop)
    raise ValueError(f"unknown worker request {message[0]!r}")


class Worker:
    def __init__(self, endpoint: Endpoint) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=_child, args=(endpoint, child), daemon=True,
                                     name=f"bench-worker-{endpoint.system}")

    def __enter__(self) -> Worker:
        self._proc.start()
        try:
            self._expect("connected", START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _expect(self, kind: str, timeout_s: float) -> Any:
        if not self._conn.poll(timeout_s):
            raise WorkerError(f"worker gave no {kind!r} within {timeout_s:g} s")
        try:
            message = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerError(f"worker exited while {kind!r} was awaited") from exc
        if message[0] == "error":
            raise WorkerError(f"worker failed:\n{message[1]}")
        if message[0] != kind:
            raise WorkerError(f"worker answered {message!r}, expected {kind!r}")
        return message[1] if len(message) > 1 else None

    def begin(self, *request: Any, timeout_s: float) -> None:
        """Send ``request`` and wait until the worker is subscribed (``ready``)."""
        self._conn.send(request)
        self._expect("ready", timeout_s)

    @property
    def pid(self) -> int:
        assert self._proc.pid is not None, "the worker has not started"
        return self._proc.pid

    def stop_idle(self) -> None:
        self._conn.send(("stop",))

    def result(self, timeout_s: float) -> Any:
        return self._expect("result", timeout_s)

    def close(self) -> None:
        if self._proc.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(("exit",))
            self._proc.join(EXIT_TIMEOUT_S)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(EXIT_TIMEOUT_S)
