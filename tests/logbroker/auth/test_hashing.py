"""Hashing lanes with real threads (``logbroker.auth.hashing``): which lane a job runs in and when,
checked by the order jobs start, never by timing."""

from __future__ import annotations

import asyncio
import threading

import pytest

from logbroker.auth.hashing import HashLanes, LaneBound
from logbroker.errors import TooManyRequestsError

WAIT_S = 10.0


class Jobs:
    """Hashing stand-ins: each records that it started, then waits for its gate."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._lock = threading.Lock()
        self.gates: dict[str, threading.Event] = {}

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    def __call__(self, name: str, gate: str) -> str:
        with self._lock:
            self.started.append(name)
        assert self.gate(gate).wait(WAIT_S), f"{gate} never opened"
        return name


async def _until(condition, what: str) -> None:
    async with asyncio.timeout(WAIT_S):
        while not condition():
            await asyncio.sleep(0.005)


def test_a_login_runs_at_once_beside_a_flood_of_password_changes():
    async def main() -> None:
        lanes, jobs = HashLanes(), Jobs()
        try:
            changes = [asyncio.create_task(lanes.run("own", jobs, f"change{i}", "changes")) for i in range(10)]
            await _until(lambda: jobs.started == ["change0"], "the first change")
            assert lanes.running == {"trusted": 0, "untrusted": 0, "own": 1} and lanes.waiting("own") == 9
            jobs.gate("login").set()
            assert await lanes.run("trusted", jobs, "login", "login") == "login"
            assert await lanes.run("untrusted", jobs, "first-login", "login") == "first-login"
            assert jobs.started == ["change0", "login", "first-login"], "the logins did not queue behind changes"
            assert not any(task.done() for task in changes)
            jobs.gate("changes").set()
            assert await asyncio.gather(*changes) == [f"change{i}" for i in range(10)]
            assert lanes.ran == {"trusted": 1, "untrusted": 1, "own": 10}
        finally:
            for gate in jobs.gates.values():
                gate.set()
            lanes.close()

    asyncio.run(main())


def test_when_every_thread_is_busy_a_login_gets_the_next_free_one_before_waiting_changes():
    async def main() -> None:
        lanes, jobs = HashLanes(), Jobs()
        try:
            first = asyncio.create_task(lanes.run("untrusted", jobs, "first-login", "first"))
            change = asyncio.create_task(lanes.run("own", jobs, "change0", "change0"))
            await _until(lambda: len(jobs.started) == 2, "both threads busy")
            later = [asyncio.create_task(lanes.run("own", jobs, f"change{i}", "later")) for i in range(1, 4)]
            login = asyncio.create_task(lanes.run("trusted", jobs, "login", "login"))
            await asyncio.sleep(0.05)
            assert lanes.waiting("trusted") == 1 and lanes.waiting("own") == 3
            jobs.gate("login").set()
            jobs.gate("change0").set()  # a thread frees: the login gets it, not change1
            assert await login == "login" and await change == "change0"
            assert jobs.started[2] == "login", jobs.started
            jobs.gate("later").set()
            jobs.gate("first").set()
            await asyncio.gather(first, *later)
            assert jobs.started[3:] == ["change1", "change2", "change3"], "a lane runs its jobs in order"
        finally:
            for gate in jobs.gates.values():
                gate.set()
            lanes.close()

    asyncio.run(main())


def test_a_full_lane_refuses_at_once_and_a_cancelled_wait_frees_its_place():
    async def main() -> None:
        bounds = {"trusted": LaneBound(2, 4), "untrusted": LaneBound(1, 2), "own": LaneBound(1, 2)}
        lanes, jobs = HashLanes(2, bounds), Jobs()
        try:
            running = asyncio.create_task(lanes.run("own", jobs, "change0", "go"))
            await _until(lambda: jobs.started == ["change0"], "the first change")
            waiting = [asyncio.create_task(lanes.run("own", jobs, f"change{i}", "go")) for i in (1, 2)]
            await asyncio.sleep(0.01)
            with pytest.raises(TooManyRequestsError) as refused:
                await lanes.run("own", jobs, "change3", "go")
            assert refused.value.retry_after_s > 0
            waiting[0].cancel()
            await asyncio.sleep(0.01)
            assert lanes.waiting("own") == 1
            third = asyncio.create_task(lanes.run("own", jobs, "change3", "go"))
            jobs.gate("go").set()
            assert await asyncio.gather(running, waiting[1], third) == ["change0", "change2", "change3"]
            assert lanes.running == {"trusted": 0, "untrusted": 0, "own": 0}
        finally:
            for gate in jobs.gates.values():
                gate.set()
            lanes.close()

    asyncio.run(main())
