"""The decode pool runs work off the event loop and bounds what waits for it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from http_api.decoding import DecodePool
from logbroker.errors import NotAvailableError


@pytest.mark.asyncio
async def test_work_runs_on_a_pool_thread_and_the_loop_goes_on() -> None:
    pool = DecodePool(threads=1, waiting_max=4)
    release = threading.Event()
    try:
        blocked = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(0)  # the loop is free while the thread waits
        assert not blocked.done()
        assert await asyncio.wait_for(asyncio.sleep(0, "loop"), 5) == "loop"
        release.set()
        assert await blocked is True
        assert await pool.run(threading.current_thread) is not threading.current_thread()
    finally:
        release.set()
        pool.close()


@pytest.mark.asyncio
async def test_past_its_waiting_bound_a_call_is_refused_as_retriable() -> None:
    pool = DecodePool(threads=1, waiting_max=2)
    release = threading.Event()
    try:
        waiting = [asyncio.ensure_future(pool.run(release.wait, 10)) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(NotAvailableError) as caught:
            await pool.run(len, b"x")
        assert caught.value.retriable
        release.set()
        assert await asyncio.gather(*waiting) == [True, True]
        assert await pool.run(len, b"xy") == 2
    finally:
        release.set()
        pool.close()
