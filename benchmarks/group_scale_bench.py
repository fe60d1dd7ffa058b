"""Group coordinator cost at scale: many single-member groups on one node, showing that a join
costs the same with 1,000 or 100,000 groups, and that a mass session expiry leaves the node
responsive. ``groupscale`` runs with auth off (no per-user limit); ``groupscale-auth`` with auth
on, the groups joined by an admin (a bearer token on every call, no limit; each new group is
claimed, one line appended to ``groups.jsonl``), and adds a user's figures (below).

Per repetition, on a fresh node:
- join ``groups`` new groups (one member each, ``CONCURRENCY`` joins in flight, one topic of one
  partition); ``join_us_at_<n>`` is the wall time per join over the ``WINDOW`` joins that bring
  the count to ``n`` (flat figures = O(1) per join), ``join_server_cpu_us_at_<n>`` the node's CPU
  time per join over the same window (less sensitive to other load on the machine),
  ``join_ms_p99_at_<n>`` the 99th percentile of those joins' latencies; ``__consumer_offsets``
  snapshots run during this phase; ``node_rss_mb`` is the node's memory after it;
- rejoin every member (same ``member_id``) with a session timeout chosen so that all sessions
  lapse at the same moment; ``expiry_s`` is the time from that moment until every sampled group
  is empty (each group rebalances once, ``EXPIRIES_PER_TICK_MAX`` expiries a tick);
- at the largest count: ``metrics_scrape_ms`` and ``metrics_kb``, one ``/metrics`` scrape (per-group
  series are capped, ``logbroker/state_metrics.py``); ``list_page_ms``, one ``GET /v1/groups``
  page of ``LIST_LIMIT`` groups from the middle (admin or auth off: every group visible);
- auth on only: the admin joins ``USER_GROUPS`` fewer groups (the top mark is 99,500), then a user
  (default limits: 1,000 groups) with a read grant on the topic joins ``USER_GROUPS`` new groups,
  bringing the node to 100,000 (its ``GROUPS_MAX``): ``user_join_server_cpu_us`` is the node's CPU time per
  join, its per-user groups count included; ``user_list_page_ms`` lists the groups the user sees
  (a page looks at no more than 10,000 names of the others' groups);
- ``/healthz`` is called every ``HEALTH_EVERY_S`` by its own connection throughout;
  ``healthz_ms_max_joins`` and ``healthz_ms_max_expiry`` are the slowest answers in each phase;
- ``stop_s``: SIGTERM to exit with every group in memory; ``restart_ready_s``: start to ready
  with them replayed from ``__consumer_offsets``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import uvloop

from benchmarks import single_node
from benchmarks.procstat import cpu_seconds, rss_mb
from benchmarks.single_node import Samples, gather, publish, summarize_all
from logbroker.launcher import NodeProcess

TOPIC: Final = "scale"
CONCURRENCY: Final = 32
WINDOW: Final = 1_000
HEALTH_EVERY_S: Final = 0.02
JOIN_TIMEOUT_MS: Final = 300_000  # the maximum: no session lapses during the join phase
EXPIRY_MARGIN_S: Final = 5.0
EXPIRY_SAMPLE: Final = 50
EXPIRY_WAIT_S_MAX: Final = 300.0
ADMIN: Final = "bench-admin"
PASSWORD: Final = "bench-admin-password"
AUTH_ON: Final = ("--auth", "on", "--admin-user", ADMIN, "--admin-password", PASSWORD)
USER: Final = "bench-user"
USER_GROUPS: Final = 500
LIST_LIMIT: Final = 1_000


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    groups: int
    marks: tuple[int, ...]


QUICK = Plan(reps=3, groups=20_000, marks=(1_000, 10_000, 20_000))
FULL = Plan(reps=3, groups=100_000, marks=(1_000, 10_000, 100_000))


class HealthProbe:
    """Calls ``/healthz`` every ``HEALTH_EVERY_S`` on its own connection; keeps each latency."""

    def __init__(self, url: str) -> None:
        self._url = url + "/healthz"
        self.samples: list[tuple[float, float]] = []  # (time sent, seconds to the answer)
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
            while True:
                sent = time.perf_counter()
                async with session.get(self._url) as reply:
                    await reply.read()
                    assert reply.status == 200, reply.status
                self.samples.append((sent, time.perf_counter() - sent))
                await asyncio.sleep(HEALTH_EVERY_S)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def max_ms(self, start: float, end: float) -> float:
        """The slowest answer to a call sent in ``[start, end]`` (or still waiting at ``end``)."""
        within = [latency for sent, latency in self.samples if start <= sent <= end]
        return max(within, default=0.0) * 1000


async def call(session: aiohttp.ClientSession, url: str, method: str, path: str,
               body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Any:
    async with session.request(method, url + path, json=body, headers=headers) as reply:
        data = await reply.json()
        assert reply.status in (200, 201), (reply.status, data)
        return data


async def bearer(session: aiohttp.ClientSession, url: str, user: str, password: str) -> dict[str, str]:
    token = await call(session, url, "POST", "/v1/auth/token", {"username": user, "password": password})
    return {"Authorization": f"Bearer {token['access_token']}"}


async def timed(session: aiohttp.ClientSession, url: str, path: str, headers: dict[str, str]) -> tuple[float, int]:
    """Milliseconds to GET ``path`` (the whole body read) and the body's size."""
    started = time.perf_counter()
    async with session.get(url + path, headers=headers) as reply:
        body = await reply.read()
        assert reply.status == 200, (reply.status, body[:200])
    return (time.perf_counter() - started) * 1000, len(body)


async def user_phase(session: aiohttp.ClientSession, url: str, pid: int, admin: dict[str, str]) -> dict[str, float]:
    """A user with the default limits joins ``USER_GROUPS`` new groups among the admin's; lists."""
    password = "bench-user-password"
    await call(session, url, "POST", "/v1/users", {"username": USER, "password": password}, admin)
    await call(session, url, "PUT", f"/v1/topics/{TOPIC}/acl", {"user": USER, "permissions": ["read"]}, admin)
    user = await bearer(session, url, USER, password)
    cpu_before = cpu_seconds(pid)

    async def join(i: int) -> float:
        started = time.perf_counter()
        await call(session, url, "POST", f"/v1/groups/u{i:06d}/members",
                   {"topics": [TOPIC], "session_timeout_ms": JOIN_TIMEOUT_MS}, user)
        return time.perf_counter() - started

    await run_all(USER_GROUPS, join)
    figures = {"user_join_server_cpu_us": (cpu_seconds(pid) - cpu_before) / USER_GROUPS * 1e6}
    figures["user_list_page_ms"], _ = await timed(session, url, f"/v1/groups?limit={LIST_LIMIT}", user)
    return figures


async def run_all(count: int, job: Callable[[int], Awaitable[float]]) -> list[float]:
    """``job(i)`` for i in range(count), ``CONCURRENCY`` at a time, in order of i; their latencies."""
    latencies = [0.0] * count
    next_index = 0

    async def lane() -> None:
        nonlocal next_index
        while next_index < count:
            i = next_index
            next_index += 1
            latencies[i] = await job(i)

    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    return latencies


def admin_plan(plan: Plan, auth: bool) -> tuple[int, tuple[int, ...]]:
    """The groups the admin (or, auth off, the client) joins and the marks measured: with auth on
    the user's ``USER_GROUPS`` come on top, so the node ends at ``plan.groups`` (its ``GROUPS_MAX``)."""
    groups = plan.groups - (USER_GROUPS if auth else 0)
    return groups, tuple(min(mark, groups) for mark in plan.marks)


async def one_rep(url: str, pid: int, plan: Plan, auth: bool) -> dict[str, float]:
    figures: dict[str, float] = {}
    groups, marks = admin_plan(plan, auth)
    probe = HealthProbe(url)
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as bare:
        admin = await bearer(bare, url, ADMIN, PASSWORD) if auth else {}
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=admin) as session:
        await call(session, url, "POST", "/v1/topics", {"name": TOPIC, "partitions": 1})
        probe.start()
        members: list[str] = [""] * groups
        done_at = [0.0] * groups
        boundaries = {b for mark in marks for b in (mark - WINDOW, mark)}
        cpu_at = {0: cpu_seconds(pid)}

        async def join(i: int) -> float:
            started = time.perf_counter()
            view = await call(session, url, "POST", f"/v1/groups/g{i:06d}/members",
                              {"topics": [TOPIC], "session_timeout_ms": JOIN_TIMEOUT_MS})
            members[i] = view["member_id"]
            done_at[i] = time.perf_counter()
            if i + 1 in boundaries:
                cpu_at[i + 1] = cpu_seconds(pid)
            return done_at[i] - started

        joins_started = time.perf_counter()
        latencies = await run_all(groups, join)
        joins_ended = time.perf_counter()
        for mark in marks:
            first = mark - WINDOW
            window_s = done_at[mark - 1] - (done_at[first - 1] if first > 0 else joins_started)
            figures[f"join_us_at_{mark}"] = window_s / WINDOW * 1e6
            figures[f"join_server_cpu_us_at_{mark}"] = (cpu_at[mark] - cpu_at[first]) / WINDOW * 1e6
            figures[f"join_ms_p99_at_{mark}"] = statistics.quantiles(latencies[first:mark], n=100)[98] * 1000
        figures["joins_per_s"] = groups / (joins_ended - joins_started)
        figures["healthz_ms_max_joins"] = probe.max_ms(joins_started, joins_ended)
        if auth:
            figures.update(await user_phase(session, url, pid, admin))
        figures["node_rss_mb"] = rss_mb(pid)
        figures["metrics_scrape_ms"], size = await timed(session, url, "/metrics", admin)
        figures["metrics_kb"] = size / 1024
        middle = f"g{groups // 2:06d}"
        figures["list_page_ms"], _ = await timed(session, url, f"/v1/groups?limit={LIST_LIMIT}&after={middle}",
                                                 admin)

        rejoin_s = groups / figures["joins_per_s"]
        lapse_at = time.perf_counter() + 1.5 * rejoin_s + EXPIRY_MARGIN_S

        async def rejoin(i: int) -> float:
            started = time.perf_counter()
            timeout_ms = min(JOIN_TIMEOUT_MS, max(100, int((lapse_at - started) * 1000)))
            await call(session, url, "POST", f"/v1/groups/g{i:06d}/members",
                       {"topics": [TOPIC], "session_timeout_ms": timeout_ms, "member_id": members[i]})
            return time.perf_counter() - started

        await run_all(groups, rejoin)
        assert time.perf_counter() < lapse_at, "the rejoins ran past the moment every session lapses"
        sample = [groups - 1, *random.sample(range(groups), EXPIRY_SAMPLE)]
        await asyncio.sleep(lapse_at - time.perf_counter())
        while True:
            views = [await call(session, url, "GET", f"/v1/groups/g{i:06d}") for i in sample]
            if all(v["state"] == "empty" for v in views):
                break
            assert time.perf_counter() < lapse_at + EXPIRY_WAIT_S_MAX, "sessions did not expire"
            await asyncio.sleep(0.05)
        expired_at = time.perf_counter()
        figures["expiry_s"] = expired_at - lapse_at
        await asyncio.sleep(1.0)
        await probe.stop()
        figures["healthz_ms_max_expiry"] = probe.max_ms(lapse_at - 1.0, expired_at + 1.0)
        assert all(v["generation"] == 2 for v in views), "one rebalance per group for its expiry"
    return figures


def run(*, quick: bool, out_dir: str | None, work_dir: str | None, auth: bool = False) -> dict[str, float]:
    plan = QUICK if quick else FULL
    scenario = "groupscale-auth" if auth else "groupscale"
    flags = ("--log-level", "warning", *(AUTH_ON if auth else ()))
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    for rep in range(plan.reps):
        print(f"[{scenario}] repetition {rep + 1}/{plan.reps}: {admin_plan(plan, auth)[0]} groups", flush=True)
        with single_node.work_dir("groupscalebench-", work_dir) as work:
            data = os.path.join(work, "data")
            node = NodeProcess(data, *flags).start()
            try:
                figures = uvloop.run(one_rep(node.url, node.pid, plan, auth))
                stopping = time.perf_counter()
                code = node.stop()
                figures["stop_s"] = time.perf_counter() - stopping
                assert code == 0, f"the node exited with {code}"
                starting = time.perf_counter()
                node = NodeProcess(data, *flags).start()
                figures["restart_ready_s"] = time.perf_counter() - starting
            finally:
                node.stop()
                node.kill()
            gather(samples, figures)
    figures, units = summarize_all(samples, _unit)
    params = {"quick": quick, **dataclasses.asdict(plan), "concurrency": CONCURRENCY, "window_joins": WINDOW,
              "members_per_group": 1, "topic_partitions": 1,
              "auth": "on (an admin's bearer token: no per-user limit)" if auth else "off (no per-user limit)",
              "healthz_every_s": HEALTH_EVERY_S, "expiry_sample_groups": EXPIRY_SAMPLE + 1,
              "client": "one aiohttp process on the same machine"}
    if auth:
        params.update({"user_groups": USER_GROUPS, "admin_groups": admin_plan(plan, auth)[0],
                       "marks": list(admin_plan(plan, auth)[1])})
    params["list_limit"] = LIST_LIMIT
    return publish(scenario, figures, units, out_dir=out_dir, started_at=started, params=params)


def _unit(name: str) -> str:
    if name.startswith(("join_us", "join_server_cpu_us", "user_join_server_cpu_us")):
        return "us"
    if name.endswith("_mb"):
        return "MB"
    if name.endswith("_kb"):
        return "KiB"
    if name.endswith("_per_s"):
        return "joins/s"
    return "ms" if "_ms" in name else "s"
