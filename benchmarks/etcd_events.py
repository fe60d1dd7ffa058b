"""What changed in a cluster's etcd keys, and when this process saw it: the failover benchmark's
ground truth for lease expiry (a ``leaders/`` key deleted with its lease), elections (a
``leaders/`` key put at a new epoch) and ISR changes (a ``partitions/`` key put).

One watch on the cluster's whole prefix, from the revision after the one current at ``start``;
each event is stamped with ``time.perf_counter()`` on arrival (etcd on loopback: within a
millisecond or two of its commit). The event list is bounded (``EVENTS_MAX``); the watch is not
resumed after a stream error: it raises, so a benchmark never reads a timeline with a hole.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from typing import Any, Final

import grpc

from coordinator.etcd_client import EVENT_PUT, EtcdClient, parse_etcd_url
from coordinator.etcd_keys import cluster_prefix, parse_key

EVENTS_MAX: Final = 100_000
CREATE_TIMEOUT_S: Final = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class KeyEvent:
    at: float                   # time.perf_counter() when the event arrived
    kind: str                   # "nodes", "partitions", "leaders", ...
    name: str                   # a node id, a topic
    partition: int              # -1 unless the kind is per partition
    value: dict[str, Any] | None  # the new value, None for a delete


class EtcdEvents:
    """Watch the keys of cluster ``cluster`` at ``etcd_url`` (``etcd://host:port``) while open."""

    def __init__(self, etcd_url: str, cluster: str = "logbroker") -> None:
        self._client = EtcdClient(parse_etcd_url(etcd_url))
        self._prefix = cluster_prefix(cluster)
        self.events: list[KeyEvent] = []
        self._task: asyncio.Task[None] | None = None
        self._created = asyncio.Event()
        self.changed = asyncio.Event()  # set at every event; waiters clear it

    async def __aenter__(self) -> EtcdEvents:
        revision = await self._client.status()
        self._task = asyncio.create_task(self._watch(revision + 1))
        deadline = time.monotonic() + CREATE_TIMEOUT_S
        while not self._created.is_set():
            self.check()
            if time.monotonic() >= deadline:
                await self.__aexit__()
                raise TimeoutError(f"the etcd watch was not created within {CREATE_TIMEOUT_S:g} s")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.RpcError):
                await self._task
        await self._client.close()

    def check(self) -> None:
        """Raise the watch's error, if it ended."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()
            raise RuntimeError("the etcd watch ended")

    async def _watch(self, revision: int) -> None:
        call = self._client.watch_stream()
        try:
            await call.write(EtcdClient.watch_create(self._prefix.encode(), revision))
            while True:
                resp = await call.read()
                if resp is grpc.aio.EOF or resp.canceled or resp.compact_revision:
                    raise RuntimeError(f"the etcd watch of {self._prefix} ended: {resp}")
                if resp.created:
                    self._created.set()
                at = time.perf_counter()
                for ev in resp.events:
                    key = parse_key(bytes(ev.kv.key).decode()[len(self._prefix):])
                    if key is None:
                        continue
                    value = json.loads(bytes(ev.kv.value)) if ev.type == EVENT_PUT else None
                    if len(self.events) >= EVENTS_MAX:
                        raise RuntimeError(f"more than {EVENTS_MAX} etcd events")
                    self.events.append(KeyEvent(at, key.kind, key.name, key.partition, value))
                if resp.events:
                    self.changed.set()
        finally:
            call.cancel()

    def first(self, after: float, kind: str, name: str, partition: int = -1, *,
              deleted: bool | None = None, where: Any = None) -> KeyEvent | None:
        """The first event at or after ``after`` on that key: a delete (``deleted=True``), a put
        (``False``) or either, whose value satisfies ``where`` (a callable) when given."""
        for event in self.events:
            if event.at < after or event.kind != kind or event.name != name or event.partition != partition:
                continue
            if deleted is not None and (event.value is None) != deleted:
                continue
            if where is not None and (event.value is None or not where(event.value)):
                continue
            return event
        return None

    async def wait_for(self, timeout_s: float, after: float, kind: str, name: str, partition: int = -1, *,
                       deleted: bool | None = None, where: Any = None) -> KeyEvent:
        """``first(...)``, waiting at most ``timeout_s`` for it (a TimeoutError that names it)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check()
            self.changed.clear()
            found = self.first(after, kind, name, partition, deleted=deleted, where=where)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no etcd event on {kind}/{name}/{partition} (deleted={deleted}) "
                                   f"within {timeout_s:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.5))
