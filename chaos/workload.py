"""The clients of a chaos run, each a coroutine recording into the ``History`` until ``stop`` is set:

- ``produce``: an idempotent ``Producer`` (``acks=all``) sending unique values
  ``<name>-<partition>-<n>`` to every partition, at most ``IN_FLIGHT`` unanswered per partition,
  at a bounded rate;
- ``read``: a ``Consumer`` reading every partition from offset 0 (what it got is checked against
  the final log: nothing read may change later);
- ``group``: one ``GroupConsumer`` member committing the position after each poll, and
  ``observe_group`` reading the committed offsets back once a second;
- ``queue_send`` / ``queue_receive``: unique messages sent with an ``Idempotency-Key``
  (``acks=all``), received with a visibility timeout and acknowledged;
- ``keyed``: keyed writes to the compacted topic (one producer id, ``acks=all``), each partition from a loop
  of its own: half to a few hot keys (overwritten every second or so: compaction has work), half
  to a larger set of cold keys (rarely overwritten: their latest value often dates from a fault),
  one in ten a tombstone; every record carries its write's id in an ``id`` header;
- ``observe_compaction``: each node's compaction metrics of the compacted topic, once a second: a
  ``compaction`` event each time a partition's last pass time moved (a lower bound on the passes:
  two within one scrape count once, and a restarted node starts again from none);
- ``watch``: the cluster's leaders and epochs (``GET /v1/cluster``) four times a second from each
  node, each node polled on its own (a bounded wait each) and the newest view of each partition
  kept, so that a paused or cut-off node neither leaves the record stale nor slows the others.

Errors are recorded, never raised: a client keeps going through every fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from typing import Any, Final

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from chaos.cluster import ADMIN, PASSWORD
from chaos.history import History
from logbroker.client import Client, Consumer, GroupConsumer, LogBrokerError, Producer, QueueConsumer, RetryPolicy
from logbroker.client.partitioning import key_partition

IN_FLIGHT: Final = 16
CALL_TIMEOUT_S: Final = 8.0
RETRY: Final = RetryPolicy(attempts=12, backoff_s=0.05, backoff_max_s=1.0, retry_after_max_s=1.0)
VISIBILITY_TIMEOUT_MS: Final = 3_000
GROUP: Final = "chaos-group"
WATCH_INTERVAL_S: Final = 0.25
WATCH_CALL_S: Final = 1.0
VIEW_MAX_AGE_S: Final = 2.0  # a node's last cluster view counts this long after it came
HOT_KEYS: Final = 24
COLD_KEYS: Final = 1_200
HOT_SHARE: Final = 0.5
TOMBSTONE_SHARE: Final = 0.1
SCRAPE_INTERVAL_S: Final = 1.0
SCRAPE_CALL_S: Final = 1.0
LAST_PASS: Final = "logbroker_compaction_last_timestamp_seconds"
BYTES_REMOVED: Final = "logbroker_compaction_bytes_removed"


def client(urls: Sequence[str], token: str | None = None) -> Client:
    """A client of the cluster; given a ``token`` (one login shared by every client: logins are
    throttled), it logs in again only when that token is refused."""
    return Client(list(urls), token=token, username=ADMIN, password=PASSWORD, timeout_s=CALL_TIMEOUT_S,
                  retry=RETRY, metadata_max_age_s=2.0)


def _error(exc: BaseException) -> str:
    if isinstance(exc, LogBrokerError):
        return f"{exc.status} {exc.code}"
    return type(exc).__name__


class Workload:
    def __init__(self, history: History, urls: Sequence[str], topic: str, partitions: int, queue: str, *,
                 token: str | None = None) -> None:
        self.history, self.urls, self.topic, self.partitions, self.queue = history, list(urls), topic, partitions, queue
        self.token = token
        self.stop = asyncio.Event()
        self.leaders: dict[str, tuple[int, int]] = {}  # "topic/partition" -> (leader, epoch)

    async def produce(self, name: str, rate: float) -> None:
        """One producer (one producer id) writing to every partition, each from a loop of its own
        with its own bound on unanswered records, so that a stalled partition does not hold back
        the others (``rate`` is the producer's total)."""
        async with client(self.urls, self.token) as c:
            producer = Producer(c, acks="all", linger_ms=5, retries=20, retry_backoff_ms=100)
            await asyncio.gather(*(self._produce_to(producer, name, p, rate / self.partitions)
                                   for p in range(self.partitions)))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.flush(), 60)

    async def _produce_to(self, producer: Producer, name: str, partition: int, rate: float) -> None:
        h = self.history
        gate = asyncio.Semaphore(IN_FLIGHT)
        pending: set[asyncio.Task[None]] = set()

        async def settle(future: asyncio.Future[Any], value: str) -> None:
            try:
                meta = await future
                h.add("produce", "ok", name, value=value, partition=partition, offset=meta.offset)
            except Exception as exc:  # every outcome is recorded
                h.add("produce", "info", name, value=value, partition=partition, error=_error(exc))
            finally:
                gate.release()

        n = 0
        while not self.stop.is_set():
            await gate.acquire()
            value = f"{name}-{partition}-{n}"
            h.add("produce", "invoke", name, value=value, partition=partition, seq=n)
            try:
                future = await producer.send(self.topic, value.encode(), partition=partition)
            except Exception as exc:
                h.add("produce", "info", name, value=value, partition=partition, error=_error(exc))
                gate.release()
                await asyncio.sleep(0.2)
            else:
                task = asyncio.get_running_loop().create_task(settle(future, value))
                pending.add(task)
                task.add_done_callback(pending.discard)
            n += 1
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*pending, return_exceptions=True)

    async def keyed(self, name: str, topic: str, partitions: int, rate: float, *, seed: int) -> None:
        """One keyed writer on the compacted ``topic`` (``rate``: records per second, all
        partitions together); its keys and tombstones drawn from ``seed``."""
        keys: dict[int, tuple[list[str], list[str]]] = {p: ([], []) for p in range(partitions)}
        for i in range(HOT_KEYS + COLD_KEYS):
            key = f"{'hot' if i < HOT_KEYS else 'cold'}-{i}"
            keys[key_partition(key.encode(), partitions)][0 if i < HOT_KEYS else 1].append(key)
        async with client(self.urls, self.token) as c:
            producer = Producer(c, acks="all", linger_ms=5, retries=20, retry_backoff_ms=100)
            await asyncio.gather(*(self._keyed_to(producer, name, topic, p, keys[p], rate / partitions,
                                                  random.Random(f"{seed}-{name}-{p}"))
                                   for p in range(partitions)))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.flush(), 60)

    async def _keyed_to(self, producer: Producer, name: str, topic: str, partition: int,
                        keys: tuple[list[str], list[str]], rate: float, rng: random.Random) -> None:
        h = self.history
        gate = asyncio.Semaphore(IN_FLIGHT)
        pending: set[asyncio.Task[None]] = set()

        async def settle(future: asyncio.Future[Any], fields: dict[str, Any]) -> None:
            try:
                meta = await future
                h.add("kv_write", "ok", name, **fields, offset=meta.offset)
            except Exception as exc:  # every outcome is recorded
                h.add("kv_write", "info", name, **fields, error=_error(exc))
            finally:
                gate.release()

        n = 0
        while not self.stop.is_set():
            await gate.acquire()
            hot, cold = keys
            key = rng.choice(hot if hot and (not cold or rng.random() < HOT_SHARE) else cold)
            write = f"{name}-{partition}-{n}"
            value = None if rng.random() < TOMBSTONE_SHARE else write
            fields = {"key": key, "id": write, "value": value, "partition": partition}
            h.add("kv_write", "invoke", name, **fields, seq=n)
            try:
                future = await producer.send(topic, None if value is None else value.encode(), key=key.encode(),
                                             headers=[("id", write.encode())], partition=partition)
            except Exception as exc:
                h.add("kv_write", "info", name, **fields, error=_error(exc))
                gate.release()
                await asyncio.sleep(0.2)
            else:
                task = asyncio.get_running_loop().create_task(settle(future, fields))
                pending.add(task)
                task.add_done_callback(pending.discard)
            n += 1
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*pending, return_exceptions=True)

    async def read(self, name: str) -> None:
        async with client(self.urls, self.token) as c, Consumer(c, wait_ms=300) as consumer:
            consumer.assign((self.topic, p) for p in range(self.partitions))
            for p in range(self.partitions):
                consumer.seek(self.topic, p, 0)
            while not self.stop.is_set():
                try:
                    records = await consumer.poll(timeout_ms=300)
                except Exception as exc:
                    self.history.add("read", "info", name, error=_error(exc))
                    await asyncio.sleep(0.3)
                    continue
                by_partition: dict[int, list[list[Any]]] = {}
                for r in records:
                    by_partition.setdefault(r.partition, []).append([r.offset, (r.value or b"").decode()])
                for p, got in sorted(by_partition.items()):
                    self.history.add("read", "ok", name, partition=p, records=got)

    async def group(self, name: str) -> None:
        h = self.history
        async with client(self.urls, self.token) as c:
            member = GroupConsumer(c, GROUP, [self.topic], session_timeout_ms=6_000, enable_auto_commit=False,
                                   wait_ms=300)
            while not self.stop.is_set():
                try:
                    if member.member_id is None:
                        await member.start()
                    records = await member.poll(timeout_ms=300)
                except Exception as exc:
                    h.add("group_poll", "info", name, error=_error(exc))
                    await asyncio.sleep(0.3)
                    continue
                ends: dict[int, int] = {}
                for r in records:
                    ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
                if not ends:
                    continue
                offsets = sorted(ends.items())
                begun = h.now()
                try:
                    await member.commit({(self.topic, p): o for p, o in offsets})
                    h.add("commit", "ok", name, offsets=offsets, invoke_time=begun)
                except Exception as exc:
                    h.add("commit", "info", name, offsets=offsets, invoke_time=begun, error=_error(exc))
                    await asyncio.sleep(0.3)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(member.close(), 10)

    async def observe_group(self, name: str) -> None:
        async with client(self.urls, self.token) as c:
            while not self.stop.is_set():
                begun = self.history.now()
                try:
                    described = await c.describe_group(GROUP)
                except Exception as exc:
                    self.history.add("committed", "info", name, error=_error(exc))
                else:
                    offsets = sorted((int(o["partition"]), int(o["committed_offset"])) for o in described["offsets"]
                                     if o["topic"] == self.topic and o["committed_offset"] is not None)
                    self.history.add("committed", "ok", name, offsets=offsets, invoke_time=begun)
                await asyncio.sleep(1.0)

    async def queue_send(self, name: str, rate: float) -> None:
        async with client(self.urls, self.token) as c:
            n = 0
            while not self.stop.is_set():
                value = f"{name}-{n}"
                n += 1
                self.history.add("queue_send", "invoke", name, value=value)
                try:
                    await c.request("POST", f"/v1/queues/{self.queue}/messages", params={"acks": "all"},
                                    json_body={"records": [{"value": value}]}, headers={"Idempotency-Key": value},
                                    idempotent=True)
                    self.history.add("queue_send", "ok", name, value=value)
                except Exception as exc:
                    self.history.add("queue_send", "info", name, value=value, error=_error(exc))
                    await asyncio.sleep(0.2)
                await asyncio.sleep(1 / rate)

    async def queue_receive(self, name: str, *, until_empty: bool = False, deadline_s: float = 0.0) -> bool:
        """Receive and ack until ``stop`` (or, ``until_empty``, until three receives in a row got
        nothing, at most ``deadline_s``); returns whether it ended on an empty queue."""
        h = self.history
        empty = 0
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        async with client(self.urls, self.token) as c:
            receiver = QueueConsumer(c, self.queue, max_messages=20, visibility_timeout_ms=VISIBILITY_TIMEOUT_MS,
                                     wait_ms=500)
            while (until_empty and loop.time() < end) or (not until_empty and not self.stop.is_set()):
                begun = h.now()
                try:
                    messages = await receiver.receive()
                except Exception as exc:
                    h.add("deliver", "info", name, invoke_time=begun, error=_error(exc))
                    empty = 0
                    await asyncio.sleep(0.3)
                    continue
                if not messages:
                    empty += 1
                    if until_empty and empty >= 3:
                        return True
                    continue
                empty = 0
                ids = [f"{m.partition}:{m.offset}" for m in messages]
                h.add("deliver", "ok", name, invoke_time=begun,
                      values=[[(m.value or b"").decode(), m.delivery_count, i]
                              for m, i in zip(messages, ids, strict=True)])
                try:
                    answer = await receiver.ack(messages)
                except Exception as exc:
                    h.add("queue_ack", "info", name, ids=ids, error=_error(exc))
                    continue
                complete = int(answer.get("acked", 0)) == len(messages) and not answer.get("failed")
                h.add("queue_ack", "ok" if complete else "info", name, ids=ids)
        return False

    async def observe_compaction(self, name: str, topic: str) -> None:
        seen: dict[tuple[str, int], float] = {}
        timeout = aiohttp.ClientTimeout(total=SCRAPE_CALL_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not self.stop.is_set():
                for node, url in enumerate(self.urls, start=1):
                    try:
                        async with session.get(f"{url}/metrics",
                                               headers={"Authorization": f"Bearer {self.token}"}) as response:
                            text = await response.text() if response.status == 200 else ""
                    except (aiohttp.ClientError, TimeoutError):
                        continue
                    try:
                        figures = compaction_figures(text, topic)
                    except ValueError:  # a torn or foreign answer: the next scrape tells
                        continue
                    for partition, last, removed in figures:
                        if last > 0 and seen.get((f"node-{node}", partition)) != last:
                            seen[(f"node-{node}", partition)] = last
                            self.history.add("compaction", "ok", name, node=f"node-{node}", partition=partition,
                                             last=last, bytes_removed=removed)
                await asyncio.sleep(SCRAPE_INTERVAL_S)

    async def watch(self, name: str) -> None:
        """One poller per node, so that a node slow to answer (paused, cut off: each call waits up to
        ``WATCH_CALL_S``) delays only its own view: a leadership another node reports is recorded
        within about ``WATCH_INTERVAL_S`` of its election, and the nemesis picks its targets by it."""
        views = NodeViews(len(self.urls), VIEW_MAX_AGE_S)
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(client([url], self.token)) for url in self.urls]
            await asyncio.gather(*(self._poll(name, node, c, views) for node, c in enumerate(clients, start=1)))

    async def _poll(self, name: str, node: int, cluster_client: Client, views: NodeViews) -> None:
        loop = asyncio.get_running_loop()
        while not self.stop.is_set():
            try:
                views.seen(node, await asyncio.wait_for(cluster_client.cluster(), WATCH_CALL_S), loop.time())
            except Exception as exc:  # recorded, never raised: the watcher keeps going through every fault
                if views.failed(node):  # every node failing: said once
                    self.history.add("cluster", "info", name, error=_error(exc))
            for key, (leader, epoch, isr) in sorted(views.merged(loop.time()).items()):
                if self.leaders.get(key) != (leader, epoch):
                    self.leaders[key] = (leader, epoch)
                    self.history.add("leader", "ok", name, partition=key, leader=leader, epoch=epoch, isr=isr)
            await asyncio.sleep(WATCH_INTERVAL_S)


class NodeViews:
    """Each node's latest ``GET /v1/cluster`` answer and when it came. ``merged`` is ``newest``
    over the answers younger than ``max_age_s``: a node that stopped answering stops counting, so
    its last word cannot outlive what the others see."""

    def __init__(self, nodes: int, max_age_s: float) -> None:
        self.nodes = frozenset(range(1, nodes + 1))
        self.max_age_s = max_age_s
        self._views: dict[int, tuple[float, dict[str, Any]]] = {}
        self._failing: set[int] = set()

    def seen(self, node: int, view: dict[str, Any], at: float) -> None:
        self._views[node] = (at, view)
        self._failing.discard(node)

    def failed(self, node: int) -> bool:
        """Record a failed call; True when it makes every node's latest call a failed one (said
        once, until one answers again)."""
        before = self._failing >= self.nodes
        self._failing.add(node)
        return not before and self._failing >= self.nodes

    def merged(self, now: float) -> dict[str, tuple[int, int, list[int] | None]]:
        return newest([view for when, view in self._views.values() if now - when <= self.max_age_s])


def newest(views: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int, list[int] | None]]:
    """Per ``topic/partition``, ``(leader, epoch, in-sync replicas)`` from the newest of several
    nodes' ``GET /v1/cluster`` answers: the highest epoch, and at one epoch "no leader" (the
    leader's key went with its lease) over the leader a node has not yet seen go."""
    best: dict[str, tuple[int, int, list[int] | None]] = {}
    for view in views:
        for topic in view.get("topics", []):
            for p in topic["partitions"]:
                key = f"{topic['name']}/{p['partition']}"
                seen = (int(p["leader"]), int(p["leader_epoch"]), p.get("in_sync_replicas"))
                held = best.get(key)
                if held is None or (seen[1], seen[0] < 0) > (held[1], held[0] < 0):
                    best[key] = seen
    return best


def compaction_figures(text: str, topic: str) -> list[tuple[int, float, float]]:
    """``(partition, last pass time in s, bytes removed)`` of ``topic``'s partitions in a node's
    metrics text (the partitions it holds and compacts)."""
    last: dict[int, float] = {}
    removed: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in (LAST_PASS, BYTES_REMOVED):
            continue
        for sample in family.samples:
            if sample.labels.get("topic") == topic and sample.name in (LAST_PASS, BYTES_REMOVED + "_total"):
                target = last if family.name == LAST_PASS else removed
                target[int(sample.labels["partition"])] = float(sample.value)
    return [(p, t, removed.get(p, 0.0)) for p, t in sorted(last.items())]
