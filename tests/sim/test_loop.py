"""The simulated loop: virtual time that jumps, a reproducible order, no threads, no real I/O,
and bounds that end a stuck or endless run."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from sim.loop import RealWorldError, SimBoundError, SimLoop, SimStuckError, run


def test_time_jumps_to_the_next_timer_instead_of_sleeping():
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(3600)
        middle = loop.time()
        async with asyncio.timeout(10):
            await asyncio.sleep(5)
        return middle - start, loop.time() - start

    wall = time.monotonic()
    assert run(main()) == (3600, 3605)
    assert time.monotonic() - wall < 5  # an hour and more of virtual time, no real waiting


def test_a_deadline_fires_on_virtual_time():
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.5):
                await asyncio.Event().wait()
        return loop.time() - start

    assert run(main()) == 2.5


def test_callbacks_run_ready_first_in_order_then_timers_by_due_time():
    order: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, order.append, "late")
        loop.call_later(0.1, order.append, "early")
        for name in ("a", "b", "c"):
            loop.call_soon(order.append, name)
        await asyncio.sleep(1)

    run(main())
    assert order == ["a", "b", "c", "early", "late"]


def test_the_same_program_gives_the_same_interleaving():
    def once() -> list[tuple[float, str]]:
        seen: list[tuple[float, str]] = []

        async def worker(name: str, gaps: list[float]) -> None:
            loop = asyncio.get_running_loop()
            for gap in gaps:
                await asyncio.sleep(gap)
                seen.append((loop.time(), name))

        async def main() -> None:
            # equal due times on purpose: the tie is broken the same way every run
            await asyncio.gather(*(worker(f"w{i}", [0.1, 0.1, 0.05 * i, 0.1]) for i in range(8)))

        run(main())
        return seen

    first = once()
    assert len(first) == 32 and first == once()


def test_run_in_executor_runs_inline_and_no_thread_starts():
    threads = threading.active_count()

    async def main() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        value = await loop.run_in_executor(None, lambda: threading.get_ident())
        failed = loop.run_in_executor(None, lambda: 1 // 0)
        with pytest.raises(ZeroDivisionError):
            await failed
        return value, loop.time() - start

    ident, elapsed = run(main())
    assert ident == threading.get_ident() and elapsed == 0
    assert threading.active_count() == threads


def test_real_network_io_is_refused():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        with pytest.raises(RealWorldError):
            await asyncio.open_connection("127.0.0.1", 1)  # no simulated network given
        with pytest.raises(RealWorldError):
            await loop.getaddrinfo("example.com", 80)
        with socket.socket() as sock:
            sock.setblocking(False)
            with pytest.raises((RealWorldError, NotImplementedError)):
                await loop.sock_connect(sock, ("127.0.0.1", 1))
            with pytest.raises((RealWorldError, NotImplementedError)):
                loop.add_reader(sock.fileno(), lambda: None)

    run(main())


def test_a_thread_cannot_schedule_on_the_loop():
    errors: list[BaseException] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def from_thread() -> None:
            try:
                loop.call_soon_threadsafe(lambda: None)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=from_thread)
        thread.start()
        thread.join(5)

    run(main())
    assert len(errors) == 1 and isinstance(errors[0], RealWorldError)


def test_waiting_for_what_never_comes_is_an_error_not_a_hang():
    async def main() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimStuckError):
        run(main())


def test_a_livelock_and_an_endless_schedule_hit_their_bounds():
    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    async def forever() -> None:
        while True:
            await asyncio.sleep(3600)

    with pytest.raises(SimBoundError):
        run(spin(), loop=SimLoop(steps_max=10_000))
    with pytest.raises(SimBoundError):
        run(forever(), loop=SimLoop(time_max_s=24 * 3600))


def test_leftover_tasks_are_cancelled_oldest_first():
    cancelled: list[int] = []

    async def sleeper(n: int) -> None:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    async def main() -> None:
        for n in range(50):
            asyncio.get_running_loop().create_task(sleeper(n))
        await asyncio.sleep(1)

    run(main())
    assert cancelled == list(range(50))


def test_unhandled_errors_are_recorded():
    async def main() -> None:
        asyncio.get_running_loop().call_soon(lambda: 1 // 0)
        await asyncio.sleep(0.1)

    loop = SimLoop()
    run(main(), loop=loop)
    assert [type(exc) for _, exc in loop.errors] == [ZeroDivisionError]


def test_a_delay_below_the_clocks_resolution_still_moves_time_on():
    # ``sleep(spacing - (now - last))`` may ask for a delay that, added to the float clock, gives
    # the present back: the sleeper would wake at the same time forever (a crash watch's probe
    # spacing did, one seed in a few hundred)
    async def main() -> tuple[float, float, int]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(1e-15)
        woke = loop.time()
        last, spacing, rounds = start, 0.1 + 1e-15, 0
        while loop.time() - last < spacing:  # the crash watch's own loop
            rounds += 1
            await asyncio.sleep(spacing - (loop.time() - last))
        return start, woke, rounds

    start, woke, rounds = run(main(), loop=SimLoop(start_s=1024.070083679927, steps_max=1000))
    assert woke > start and rounds < 5
