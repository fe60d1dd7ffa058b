"""How long a producer is without a leader when one dies, and how long the preferred replica takes
to lead again once it is back (issue 16, item 7; DESIGN §5, §6).

Three nodes on a real etcd (auth on, the internal RPC over mutual TLS, as ``cluster_nodes`` sets
up), once with each lease TTL of ``TTLS_MS`` (the default, then a shorter one: the lease is what
bounds a failover). Each repetition creates a one-partition topic with replication factor 3 and
waits for its three replicas in sync; one producer of the client library (``logbroker.client``
``Producer``, ``acks=all``, default ``RetryPolicy``: it follows leaders and retries 503
``not_leader``/``no_leader``) sends one record of ``RECORD_BYTES`` B every ``Plan.pace_s`` and awaits
each acknowledgement; a call that fails (its retries spent, or a write whose outcome is unknown)
is sent again at the next tick. Then:

- failover: SIGKILL the partition's leader (its preferred replica); ``failover_ms`` is the time
  from the kill to the first acknowledgement of a produce sent after it;
- failback: start the killed node again on its data; from the process start, ``failback_*``: its
  ready line, its return to the ISR, its leadership of the partition again, and the first
  acknowledgement of a produce sent once it leads (so appended by it, whichever node the client
  sent it to: a node that no longer leads forwards).

Where the time goes, from what this process observes: an etcd watch of the cluster's keys
(``benchmarks.etcd_events``; lease expiry is the deletion of ``leaders/<topic>/0`` with the dead
node's lease, whether the lease lapsed or the other nodes ended the dead node's session on
evidence of its crash, decision 0260; an election the put of a new epoch, an ISR change the put of
``partitions/...``, a failback's resignation the leader's own deletion of that key), ``GET
/v1/cluster`` polled every ``POLL_S`` on a surviving node (when the nodes show the new leader),
and the producer's HTTP requests (aiohttp trace hooks on the client's session, with each answer's
status and Retry-After). All on one monotonic clock (``time.perf_counter``).

- ``failover_ms`` = ``lease_expiry`` (kill -> key deleted) + ``election`` (-> new epoch put) +
  ``election_to_first_ack``, which is ``client_backoff`` (no request in flight: the client
  sleeping before its next try) + ``client_requests`` (tries refused, metadata reads) +
  ``acked_request`` (the try that was acknowledged, acks=all included); also
  ``visible_in_cluster`` and ``isr_shrink`` (from the kill), the calls that failed and the produce
  requests sent meanwhile.
- ``failback_first_ack_ms`` = ``ready`` (process start -> ready line) + ``catch_up`` (-> back in
  the ISR) + ``handover`` (-> the interim leader resigns: the failback delay, then the preferred
  replica takes the whole log) + ``election`` (-> it leads) + ``leader_to_first_ack``; also
  ``in_isr`` and ``leader`` from the process start, ``client_backoff`` from the resignation to the
  acknowledged try (the producer's ``pace_s`` ticks included), the longest time between two
  acknowledgements, and the calls that failed.

Figures are ``ttl<ms>_`` prefixed, medians of the repetitions with min and max (DESIGN §9), written
as ``failover.logbroker.json`` beside the harness's results, which rebuilds REPORT.md. Every
process is stopped by PID on the way out; on a failure the ends of the node logs are printed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime
import itertools
import os
import sys
import time
import types
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any, Final

import aiohttp

from benchmarks import cluster_nodes, single_node
from benchmarks.cluster_bench import login
from benchmarks.etcd_events import EtcdEvents, KeyEvent
from benchmarks.results import make_document
from benchmarks.single_node import Samples, gather
from benchmarks.stats import summarize_samples, unit_of
from logbroker.certs import generate
from logbroker.client import Client, LogBrokerError, Producer, RetryPolicy
from logbroker.etcd_process import running_etcd
from logbroker.launcher import NodeProcess

TTLS_MS: Final = (3_000, 6_000)  # the default --lease-ttl-ms, and the old default
NODES: Final = 3
REPLICATION_FACTOR: Final = 3
RECORD_BYTES: Final = 100
PACE_S: Final = 0.02               # one produce every 20 ms while the partition has a leader (--pace-ms)
POLL_S: Final = 0.025              # GET /v1/cluster on a surviving node
READY_TIMEOUT_S: Final = 60.0
FAILOVER_TIMEOUT_S: Final = 30.0   # beyond the lease TTL
FAILBACK_TIMEOUT_S: Final = 90.0
REQUEST_TIMEOUT_S: Final = 30.0
LOG_TAIL_LINES: Final = 40
NODE_LOG_LEVEL: Final = ("--log-level", "info")


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    steady_s: float   # producing before the kill, and between the failover and the restart
    pace_s: float = PACE_S  # between two produce calls (0: back to back)


QUICK = Plan(reps=3, steady_s=1.0)
FULL = Plan(reps=5, steady_s=3.0)


def say(text: str) -> None:
    print(f"[failover] {text}", file=sys.stderr, flush=True)


# ---- the cluster -------------------------------------------------------------------------------

class Cluster:
    """etcd and ``NODES`` nodes whose processes can be killed and started again (each stopped by
    PID on the way out, also the ones started again)."""

    def __init__(self, root: str, etcd_url: str, ttl_ms: int) -> None:
        self.root, self.etcd_url, self.ttl_ms = root, etcd_url, ttl_ms
        self.nodes: dict[int, NodeProcess] = {}
        self.started: list[NodeProcess] = []

    def log_path(self, node_id: int) -> str:
        return os.path.join(self.root, f"node-{node_id}.log")

    def _make(self, node_id: int) -> NodeProcess:
        node = cluster_nodes.cluster_node(self.root, self.etcd_url, node_id, lease_ttl_ms=self.ttl_ms,
                                          log_args=NODE_LOG_LEVEL, log_path=self.log_path(node_id))
        self.nodes[node_id] = node
        self.started.append(node)
        return node

    def start(self) -> None:
        for node_id in range(1, NODES + 1):
            self._make(node_id).start()

    def kill(self, node_id: int) -> None:
        """SIGKILL (the process is reaped by PID)."""
        self.nodes[node_id].kill()

    async def restart(self, node_id: int) -> None:
        """Start the node again on its data dir; returns at its ready line."""
        node = self._make(node_id)
        await asyncio.to_thread(node.start)

    def urls(self) -> dict[int, str]:
        return {n: p.url for n, p in self.nodes.items()}

    def stop(self) -> None:
        for node in self.started:
            node.stop()
            node.kill()

    def log_tails(self) -> str:
        out = []
        for node_id in sorted(self.nodes):
            try:
                with open(self.log_path(node_id), encoding="utf-8", errors="replace") as f:
                    lines = f.readlines()[-LOG_TAIL_LINES:]
            except OSError as exc:
                lines = [f"({exc})\n"]
            out.append(f"---- node {node_id}: the end of {self.log_path(node_id)}\n{''.join(lines)}")
        return "".join(out)


@contextlib.contextmanager
def running_cluster(root: str, ttl_ms: int) -> Iterator[tuple[Cluster, str]]:
    """etcd and the nodes, up; the cluster and etcd's URL. Every process stopped on the way out."""
    with running_etcd(os.path.join(root, "etcd")) as etcd:
        generate(os.path.join(root, "certs"), list(range(1, NODES + 1)))
        cluster = Cluster(root, etcd.url, ttl_ms)
        try:
            cluster.start()
            yield cluster, etcd.url
        except BaseException:
            print(cluster.log_tails(), file=sys.stderr)
            raise
        finally:
            cluster.stop()


# ---- what the producer saw ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP request of the producer's client (a produce try or a metadata read)."""

    start: float
    end: float
    method: str
    url: str       # scheme://host:port
    path: str
    status: int    # 0: no answer (refused, reset, timed out)
    retry_after: str = ""  # the answer's Retry-After header

    def describe(self) -> str:
        return f"{self.status}" + (f" Retry-After {self.retry_after}" if self.retry_after else "")

    @property
    def produce(self) -> bool:
        return self.method == "POST" and self.path.endswith("/records")


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One ``send_and_wait``: acknowledged (``error`` empty) or failed with the client's error."""

    sent: float
    done: float
    error: str = ""   # "<status> <code>" of the LogBrokerError


class ProducerLog:
    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.outcomes: list[Outcome] = []
        self.changed = asyncio.Event()

    def trace_config(self) -> aiohttp.TraceConfig:
        trace = aiohttp.TraceConfig()

        async def started(_session: aiohttp.ClientSession, ctx: types.SimpleNamespace,
                          _params: aiohttp.TraceRequestStartParams) -> None:
            ctx.start = time.perf_counter()

        async def ended(_session: aiohttp.ClientSession, ctx: types.SimpleNamespace,
                        params: aiohttp.TraceRequestEndParams) -> None:
            self._attempt(ctx, params.method, params.url, params.response.status,
                          params.response.headers.get("Retry-After", ""))

        async def failed(_session: aiohttp.ClientSession, ctx: types.SimpleNamespace,
                         params: aiohttp.TraceRequestExceptionParams) -> None:
            self._attempt(ctx, params.method, params.url, 0)

        trace.on_request_start.append(started)
        trace.on_request_end.append(ended)
        trace.on_request_exception.append(failed)
        return trace

    def _attempt(self, ctx: types.SimpleNamespace, method: str, url: Any, status: int, retry_after: str = "") -> None:
        self.attempts.append(Attempt(ctx.start, time.perf_counter(), method, f"{url.scheme}://{url.host}:{url.port}",
                                     url.path, status, retry_after))

    def produce_answers(self, start: float, end: float) -> dict[str, int]:
        """How the produce requests started within [start, end] were answered (status, Retry-After)."""
        return dict(collections.Counter(a.describe() for a in self.attempts if a.produce and start <= a.start <= end))

    def acks(self, after: float) -> list[Outcome]:
        return [o for o in self.outcomes if not o.error and o.sent >= after]

    def answered_by(self, outcome: Outcome) -> Attempt:
        """The produce request that got ``outcome``'s acknowledgement (one call at a time, so the
        last successful produce request before it)."""
        return [a for a in self.attempts if a.produce and a.status == 200 and a.end <= outcome.done][-1]

    async def first_ack(self, after: float, timeout_s: float, what: str) -> Outcome:
        """The first acknowledgement of a produce sent at or after ``after`` (bounded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.changed.clear()
            acked = self.acks(after)
            if acked:
                return acked[0]
            if time.monotonic() >= deadline:
                errors = sorted({o.error for o in self.outcomes if o.sent >= after})
                raise TimeoutError(f"{what}: no produce sent after it was acknowledged within {timeout_s:g} s "
                                   f"(errors: {errors})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.5)


async def produce_steadily(producer: Producer, topic: str, log: ProducerLog, stop: asyncio.Event,
                           pace_s: float) -> None:
    """One record every ``pace_s`` (no faster than the acknowledgements come), each awaited."""
    value = b"v" * RECORD_BYTES
    next_at = time.perf_counter()
    while not stop.is_set():
        sent = time.perf_counter()
        try:
            await producer.send_and_wait(topic, value, partition=0)
        except LogBrokerError as exc:
            log.outcomes.append(Outcome(sent, time.perf_counter(), f"{exc.status} {exc.code}"))
        else:
            log.outcomes.append(Outcome(sent, time.perf_counter()))
        log.changed.set()
        next_at = max(next_at + pace_s, time.perf_counter())
        await asyncio.sleep(next_at - time.perf_counter())


# ---- what the nodes show -----------------------------------------------------------------------

class LeaderPoll:
    """``GET /v1/cluster`` on one node every ``POLL_S``: when it first shows ``topic``'s
    partition 0 led by someone other than ``victim``."""

    def __init__(self, session: aiohttp.ClientSession, url: str, token: str, topic: str, victim: int) -> None:
        self.session, self.url, self.topic, self.victim = session, url, topic, victim
        self.auth = {"Authorization": f"Bearer {token}"}
        self.seen: list[tuple[float, int]] = []  # (answer time, leader)

    async def run(self) -> None:
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self.session.get(self.url + "/v1/cluster", headers=self.auth) as response:
                    body = await response.json() if response.status == 200 else {}
                at = time.perf_counter()
                for topic in body.get("topics", []):
                    if topic["name"] == self.topic:
                        leader = topic["partitions"][0]["leader"]
                        self.seen.append((at, -1 if leader is None else int(leader)))
            await asyncio.sleep(POLL_S)

    def new_leader_at(self, after: float) -> float | None:
        return next((at for at, leader in self.seen if at >= after and leader not in (-1, self.victim)), None)

    async def wait_new_leader(self, after: float, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while (at := self.new_leader_at(after)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"GET /v1/cluster on {self.url} showed no new leader of {self.topic} within "
                                   f"{timeout_s:g} s")
            await asyncio.sleep(POLL_S)
        return at


async def in_sync(admin: Client, topic: str) -> dict[str, Any]:
    """Partition 0 of ``topic`` once it has a leader and every replica is in sync (bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        partition = (await admin.describe_topic(topic))["partitions"][0]
        if partition["leader"] not in (None, -1) and set(partition["in_sync_replicas"]) == set(partition["replicas"]):
            return dict(partition)
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{topic}: not every replica in sync within {READY_TIMEOUT_S:g} s: {partition}")
        await asyncio.sleep(0.1)


# ---- one repetition ----------------------------------------------------------------------------

def busy_ms(attempts: list[Attempt], start: float, end: float) -> float:
    """How long at least one of ``attempts`` was in flight within [start, end]."""
    spans = sorted((max(a.start, start), min(a.end, end)) for a in attempts if a.end > start and a.start < end)
    total, reached = 0.0, start
    for low, high in spans:
        if high > reached:
            total += high - max(low, reached)
            reached = high
    return total * 1000


def failover_figures(prefix: str, t_kill: float, expired: KeyEvent, elected: KeyEvent, shrunk: KeyEvent,
                     visible: float, ack: Outcome, log: ProducerLog) -> dict[str, float]:
    answer = log.answered_by(ack)
    waited_until = max(elected.at, answer.start)
    attempts = [a for a in log.attempts if a.end <= answer.start]
    failed = [o for o in log.outcomes if o.error and t_kill <= o.done <= ack.done]
    return {
        f"{prefix}_failover_ms": (ack.done - t_kill) * 1000,
        f"{prefix}_failover_lease_expiry_ms": (expired.at - t_kill) * 1000,
        f"{prefix}_failover_election_ms": (elected.at - expired.at) * 1000,
        f"{prefix}_failover_election_to_first_ack_ms": (ack.done - elected.at) * 1000,
        f"{prefix}_failover_client_backoff_ms": (waited_until - elected.at) * 1000
        - busy_ms(attempts, elected.at, waited_until),
        f"{prefix}_failover_client_requests_ms": busy_ms(attempts, elected.at, waited_until),
        f"{prefix}_failover_acked_request_ms": (ack.done - waited_until) * 1000,
        f"{prefix}_failover_visible_in_cluster_ms": (visible - t_kill) * 1000,
        f"{prefix}_failover_isr_shrink_ms": (shrunk.at - t_kill) * 1000,
        f"{prefix}_failover_failed_produces_count": float(len(failed)),
        f"{prefix}_failover_produce_requests_count": float(sum(1 for a in log.attempts
                                                               if a.produce and t_kill <= a.start <= ack.done)),
    }


def failback_figures(prefix: str, t_restart: float, t_ready: float, joined: KeyEvent, resigned: KeyEvent,
                     leads: KeyEvent, ack: Outcome, log: ProducerLog) -> dict[str, float]:
    acked = [o.done for o in log.outcomes if not o.error and t_restart <= o.done <= ack.done]
    before = [o.done for o in log.outcomes if not o.error and o.done < t_restart]
    times = before[-1:] + acked
    failed = [o for o in log.outcomes if o.error and t_restart <= o.done <= ack.done]
    answer = log.answered_by(ack)
    waited_until = max(resigned.at, answer.start)
    attempts = [a for a in log.attempts if a.end <= answer.start]
    return {
        f"{prefix}_failback_ready_ms": (t_ready - t_restart) * 1000,
        f"{prefix}_failback_in_isr_ms": (joined.at - t_restart) * 1000,
        f"{prefix}_failback_leader_ms": (leads.at - t_restart) * 1000,
        f"{prefix}_failback_first_ack_ms": (ack.done - t_restart) * 1000,
        f"{prefix}_failback_catch_up_ms": (joined.at - t_ready) * 1000,
        f"{prefix}_failback_handover_ms": (resigned.at - joined.at) * 1000,
        f"{prefix}_failback_election_ms": (leads.at - resigned.at) * 1000,
        f"{prefix}_failback_leader_to_first_ack_ms": (ack.done - leads.at) * 1000,
        f"{prefix}_failback_client_backoff_ms": (waited_until - resigned.at) * 1000
        - busy_ms(attempts, resigned.at, waited_until),
        f"{prefix}_failback_longest_ack_gap_ms": max(b - a for a, b in itertools.pairwise(times)) * 1000
        if len(times) > 1 else 0.0,
        f"{prefix}_failback_failed_produces_count": float(len(failed)),
    }


async def repetition(cluster: Cluster, events: EtcdEvents, admin: Client, session: aiohttp.ClientSession,
                     token: str, plan: Plan, rep: int) -> tuple[dict[str, float], dict[str, Any]]:
    prefix = f"ttl{cluster.ttl_ms}"
    topic = f"failover-{cluster.ttl_ms}-{rep}"
    await admin.create_topic(topic, partitions=1, replication_factor=REPLICATION_FACTOR)
    placed = await in_sync(admin, topic)
    victim = int(placed["leader"])
    if victim != placed["replicas"][0]:
        raise RuntimeError(f"{topic}: led by node {victim}, not by its preferred replica: {placed}")
    survivor = next(n for n in sorted(cluster.nodes) if n != victim)
    log = ProducerLog()
    stop = asyncio.Event()
    trace_session = aiohttp.ClientSession(trace_configs=[log.trace_config()],
                                          timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S, sock_connect=10))
    client = Client(list(cluster.urls().values()), session=trace_session, username=cluster_nodes.ADMIN,
                    password=cluster_nodes.PASSWORD)
    producer = Producer(client, acks="all", linger_ms=0)
    poll = LeaderPoll(session, cluster.urls()[survivor], token, topic, victim)
    tasks = [asyncio.create_task(produce_steadily(producer, topic, log, stop, plan.pace_s)),
             asyncio.create_task(poll.run())]
    try:
        await log.first_ack(time.perf_counter(), READY_TIMEOUT_S, "warm-up")
        await asyncio.sleep(plan.steady_s)

        t_kill = time.perf_counter()
        cluster.kill(victim)
        timeout = cluster.ttl_ms / 1000 + FAILOVER_TIMEOUT_S
        expired = await events.wait_for(timeout, t_kill, "leaders", topic, 0, deleted=True)
        elected = await events.wait_for(timeout, expired.at, "leaders", topic, 0, deleted=False)
        shrunk = await events.wait_for(timeout, t_kill, "partitions", topic, 0,
                                       where=lambda v: victim not in v["isr"])
        ack = await log.first_ack(t_kill, timeout, f"failover of {topic}")
        visible = await poll.wait_new_leader(t_kill, timeout)
        figures = failover_figures(prefix, t_kill, expired, elected, shrunk, visible, ack, log)
        notes: dict[str, Any] = {
            "victim": victim, "new_leader": int(elected.value["node"]) if elected.value else -1,
            "failover_errors": sorted({o.error for o in log.outcomes if o.error and t_kill <= o.done <= ack.done}),
            "failover_produce_answers": log.produce_answers(t_kill, ack.done),
            "failover_served_by": served_by(cluster, log.answered_by(ack))}
        await asyncio.sleep(plan.steady_s)

        t_restart = time.perf_counter()
        await cluster.restart(victim)
        t_ready = time.perf_counter()
        joined = await events.wait_for(FAILBACK_TIMEOUT_S, t_restart, "partitions", topic, 0,
                                       where=lambda v: victim in v["isr"])
        leads = await events.wait_for(FAILBACK_TIMEOUT_S, joined.at, "leaders", topic, 0, deleted=False,
                                      where=lambda v: v["node"] == victim)
        resigned = events.first(joined.at, "leaders", topic, 0, deleted=True)
        if resigned is None or resigned.at > leads.at:
            raise RuntimeError(f"{topic}: node {victim} leads again with no resignation seen before")
        back = await log.first_ack(leads.at, FAILBACK_TIMEOUT_S, f"failback of {topic}")
        figures.update(failback_figures(prefix, t_restart, t_ready, joined, resigned, leads, back, log))
        notes["failback_errors"] = sorted({o.error for o in log.outcomes
                                           if o.error and t_restart <= o.done <= back.done})
        notes["failback_served_by"] = served_by(cluster, log.answered_by(back))
        notes["failback_produce_answers"] = log.produce_answers(t_restart, back.done)
        notes["epochs"] = [int(elected.value["epoch"]) if elected.value else -1,
                           int(leads.value["epoch"]) if leads.value else -1]
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()
        await trace_session.close()
    with contextlib.suppress(LogBrokerError):
        await admin.delete_topic(topic)
    return figures, notes


def served_by(cluster: Cluster, attempt: Attempt) -> str:
    """Which node the acknowledged request went to (a node that does not lead forwards it)."""
    node = next((n for n, url in cluster.urls().items() if url == attempt.url), None)
    return f"sent to node {node}" if node is not None else f"sent to {attempt.url}"


# ---- the run -----------------------------------------------------------------------------------

async def measure(cluster: Cluster, etcd_url: str, plan: Plan, samples: Samples, notes: list[dict[str, Any]]) -> None:
    async with EtcdEvents(etcd_url) as events, \
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
        urls = list(cluster.urls().values())
        token = await login(session, urls[0], cluster_nodes.ADMIN, cluster_nodes.PASSWORD)
        async with Client(urls, username=cluster_nodes.ADMIN, password=cluster_nodes.PASSWORD,
                          retry=RetryPolicy(attempts=20, backoff_max_s=1.0)) as admin:
            await wait_alive(admin, NODES)
            for rep in range(plan.reps):
                say(f"lease TTL {cluster.ttl_ms} ms, repetition {rep + 1}/{plan.reps}")
                figures, rep_notes = await repetition(cluster, events, admin, session, token, plan, rep)
                gather(samples, figures)
                notes.append({"ttl_ms": cluster.ttl_ms, "rep": rep, **rep_notes})
                say(f"failover {figures[f'ttl{cluster.ttl_ms}_failover_ms']:.0f} ms, failback to the first ack "
                    f"{figures[f'ttl{cluster.ttl_ms}_failback_first_ack_ms']:.0f} ms ({rep_notes})")
                await wait_alive(admin, NODES)


async def wait_alive(admin: Client, size: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while sum(1 for n in (await admin.cluster())["nodes"] if n["alive"]) < size:
        if time.monotonic() >= deadline:
            raise RuntimeError(f"the cluster did not list {size} nodes alive within {READY_TIMEOUT_S:g} s")
        await asyncio.sleep(0.1)


def budget_s(plan: Plan) -> float:
    """The bound on one lease TTL's measuring."""
    return plan.reps * (2 * plan.steady_s + FAILOVER_TIMEOUT_S + 2 * FAILBACK_TIMEOUT_S) + READY_TIMEOUT_S


def run(*, quick: bool, out_dir: str, work_dir: str | None, ttls_ms: tuple[int, ...] | None = None,
        pace_ms: float | None = None, command: str = "python -m benchmarks failover") -> dict[str, Any]:
    """Measure with each lease TTL in turn (``TTLS_MS`` unless given; a cluster each), the
    producer's calls ``pace_ms`` apart (default ``PACE_S``); write ``failover.logbroker.json``,
    REPORT.md and the plots; print the figures."""
    from benchmarks import harness
    from benchmarks.plan import FULL as HARNESS_PLAN
    from benchmarks.results import print_table

    plan = QUICK if quick else FULL
    if pace_ms is not None:
        plan = dataclasses.replace(plan, pace_s=pace_ms / 1000)
    ttls_ms = TTLS_MS if ttls_ms is None else ttls_ms
    started = datetime.datetime.now(datetime.UTC)
    samples: Samples = {}
    notes: list[dict[str, Any]] = []
    for ttl_ms in ttls_ms:
        with single_node.work_dir("failoverbench-", work_dir) as work, running_cluster(work, ttl_ms) as (cluster, url):
            say(f"etcd and {NODES} nodes are up, lease TTL {ttl_ms} ms")

            async def bounded(cluster: Cluster = cluster, url: str = url) -> None:
                async with asyncio.timeout(budget_s(plan)):
                    await measure(cluster, url, plan, samples, notes)

            asyncio.run(bounded())
    figures = summarize_samples(samples)
    params = {
        "run_id": started.strftime("%Y%m%dT%H%M%SZ"), "command": command, "quick": quick,
        **dataclasses.asdict(plan), "lease_ttls_ms": list(ttls_ms), "nodes": NODES,
        "replication_factor": REPLICATION_FACTOR, "partitions": 1, "record_bytes": RECORD_BYTES,
        "poll_ms": POLL_S * 1000,
        "client": "logbroker.client Producer (acks=all, linger_ms=0), one record per call, each awaited; "
                  f"Client default RetryPolicy {dataclasses.asdict(RetryPolicy())}; a failed call is sent again "
                  "at the next tick",
        "cluster": "etcd + 3 nodes on loopback, auth on, internal RPC over mutual TLS; the killed node is the "
                   "partition's leader and preferred replica (SIGKILL), started again on its data dir",
        "timeline": "etcd watch of the cluster keys (lease expiry = leaders/<topic>/0 deleted: the lease lapsed or "
                    "the session was ended on crash evidence; election = put at epoch+1, ISR = partitions/<topic>/0 "
                    "put), GET /v1/cluster polled on a surviving node, the client's HTTP requests (aiohttp trace "
                    "hooks)",
        "repetitions": notes,
    }
    document = make_document("failover", system="logbroker", version=version("logbroker"), started_at=started,
                             params=params, figures=figures, units={name: unit_of(name) for name in figures})
    harness.write_run([document], out_dir, rates=HARNESS_PLAN.latency_rates)
    print_table(document["figures"], document["unit"])
    return document
