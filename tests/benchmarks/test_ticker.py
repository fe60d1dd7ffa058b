"""The paced sender's tick keeps its interval under uvloop, whose timers round half a millisecond
down to nothing (a sender "sleeping" 0.5 ms there spun a core and sent every record alone)."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvloop

from benchmarks.scenarios import TICK_S, paced_send
from benchmarks.ticker import Ticker


class _CountingDriver:
    """What ``paced_send`` calls on a driver, counting the sends and the records in them."""

    def __init__(self) -> None:
        self.sends: list[int] = []

    async def send_now(self, log: str, payloads: list[bytes]) -> None:
        self.sends.append(len(payloads))

    async def flush_sends(self) -> None:
        return None


def test_ticks_keep_their_interval_without_spinning_under_uvloop() -> None:
    async def ticks() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        with Ticker(0.0005) as ticker:
            for _ in range(400):
                await ticker.tick()
        return time.perf_counter() - wall, time.process_time() - cpu

    wall, cpu = uvloop.run(ticks())
    assert wall >= 400 * 0.0005 * 0.9, "ticks came faster than their interval"
    assert cpu < wall * 0.6, f"the tick spun: {cpu:.3f} s of CPU in {wall:.3f} s"


def test_a_loop_that_falls_behind_sees_one_tick_not_a_backlog() -> None:
    async def behind() -> float:
        with Ticker(0.001) as ticker:
            await ticker.tick()
            time.sleep(0.05)  # the loop is held: the thread keeps ticking meanwhile
            await ticker.tick()  # the one wake that was pending
            started = time.perf_counter()
            for _ in range(5):  # each must wait for a new tick, not find fifty queued
                await ticker.tick()
            return time.perf_counter() - started

    # Five new ticks take at least four whole intervals (the first may come at once, whatever
    # the thread's phase); fifty queued wakes would have answered all five at once.
    assert asyncio.run(behind()) >= 4 * 0.001 * 0.9


def test_the_paced_sender_batches_what_fell_due_during_a_tick() -> None:
    driver = _CountingDriver()
    rate, total = 5_000, 1_000
    uvloop.run(paced_send(driver, "log", 100, rate, total))  # type: ignore[arg-type]
    assert sum(driver.sends) == total
    ticks_in_run = total / rate / TICK_S
    assert len(driver.sends) <= ticks_in_run * 1.2, f"{len(driver.sends)} sends for about {ticks_in_run:.0f} ticks"
    assert max(driver.sends) > 1


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Ticker(0)
