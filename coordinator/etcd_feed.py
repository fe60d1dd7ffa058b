"""Feeds a ``MetadataCache`` from etcd: a full load at one revision, then one watch on the whole
cluster prefix from the next revision.

Invariant: the cache applies every change under the prefix exactly once, in revision order.
After a stream error the watch resumes from the last applied revision + 1 (bounded backoff; at
once when the client moved to a new connection, ``EtcdClient.reconnect``); if that revision was
compacted, the prefix is loaded again and the difference reported. Listeners
(plain callables, run on the loop, never concurrently) hear which topics and whether nodes
changed after each applied batch; a failing listener is logged and the others still run.
``visible(revision)`` waits, bounded, until the cache has reached a revision (read-your-writes),
asking etcd for a progress notification when nothing under the prefix moves the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Final, final

import grpc

from coordinator.cache import Entry, MetadataCache
from coordinator.errors import CoordinatorUnavailableError
from coordinator.etcd_client import EVENT_PUT, EtcdClient, replaced_call
from coordinator.models import MetadataChange

log = logging.getLogger(__name__)

WATCH_BACKOFF_MIN_S: Final = 0.05
WATCH_BACKOFF_MAX_S: Final = 1.0
WATCH_CREATE_TIMEOUT_S: Final = 5.0
VISIBLE_TIMEOUT_S: Final = 5.0
PROGRESS_EVERY_S: Final = 0.2
WATCH_WRITE_TIMEOUT_S: Final = 5.0


@final
class MetadataFeed:
    def __init__(self, client: EtcdClient, prefix: str, cache: MetadataCache, clock: Callable[[], float],
                 name: str) -> None:
        self._client = client
        self._prefix = prefix
        self._cache = cache
        self._clock = clock
        self._name = name
        self._listeners: list[Callable[[MetadataChange], None]] = []
        self._put_listeners: list[tuple[str, Callable[[str], None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._call: Any = None
        self._write_lock = asyncio.Lock()
        self._created = asyncio.Event()
        self._advanced = asyncio.Event()
        self._closed = False

    def on_change(self, listener: Callable[[MetadataChange], None]) -> None:
        self._listeners.append(listener)

    def on_put(self, relative_prefix: str, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with the relative key of every put under ``relative_prefix`` the
        watch delivers (keys the cache does not decode, such as crash witnesses)."""
        self._put_listeners.append((relative_prefix, listener))

    def _notify_puts(self, keys: list[str]) -> None:
        for relative_prefix, listener in self._put_listeners:
            for key in keys:
                if key.startswith(relative_prefix):
                    try:
                        listener(key)
                    except Exception:
                        log.exception("a put listener failed on %s", key)

    def notify(self, change: MetadataChange) -> None:
        if not (change.topics or change.nodes or change.session_lost):
            return
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("a metadata listener failed on %s", change)

    async def start(self) -> None:
        """Load the prefix and start the watch; returns once etcd has created the watch."""
        revision, kvs = await self._client.range_prefix(self._prefix.encode())
        self._cache.reset((self._entry(kv) for kv in kvs), revision)
        self._task = asyncio.create_task(self._watch_loop(), name=f"etcd-watch-{self._name}")
        try:
            await asyncio.wait_for(self._created.wait(), WATCH_CREATE_TIMEOUT_S)
        except TimeoutError as exc:
            raise CoordinatorUnavailableError(f"etcd at {','.join(self._client.endpoints)}: the watch was not "
                                              f"created within {WATCH_CREATE_TIMEOUT_S:g} s") from exc

    async def close(self, timeout_s: float) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=timeout_s)

    def _entry(self, kv: Any) -> Entry:
        return Entry(bytes(kv.key).decode()[len(self._prefix):], bytes(kv.value), int(kv.create_revision),
                     int(kv.mod_revision), int(kv.lease))

    def _advance(self) -> None:
        self._advanced.set()
        self._advanced = asyncio.Event()

    async def _watch_loop(self) -> None:
        backoff = WATCH_BACKOFF_MIN_S
        while not self._closed:
            call = self._client.watch_stream()
            self._call = call
            try:
                async with self._write_lock:
                    await self._write(call, EtcdClient.watch_create(self._prefix.encode(), self._cache.revision + 1))
                while await self._receive(call):
                    backoff = WATCH_BACKOFF_MIN_S
            except (grpc.RpcError, CoordinatorUnavailableError) as exc:
                self._client.note_failure(exc)
                log.info("etcd watch of %s interrupted (%s); resuming from revision %d in %.2f s",
                         self._name, exc, self._cache.revision + 1, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, WATCH_BACKOFF_MAX_S)
            except asyncio.CancelledError:
                if not replaced_call():
                    raise
                # The client moved to a new connection (``EtcdClient.reconnect``): watch on it at once.
                log.info("etcd watch of %s moves to a new connection; resuming from revision %d",
                         self._name, self._cache.revision + 1)
            finally:
                self._call = None
                call.cancel()

    @staticmethod
    async def _write(call: Any, request: Any) -> None:
        """One request on the watch stream, bounded: a write whose stream never opened (its
        channel closed by ``EtcdClient.reconnect`` meanwhile) would otherwise wait for ever."""
        try:
            async with asyncio.timeout(WATCH_WRITE_TIMEOUT_S):
                await call.write(request)
        except TimeoutError:
            raise CoordinatorUnavailableError(f"a watch request was not sent within {WATCH_WRITE_TIMEOUT_S:g} s") \
                from None

    async def _receive(self, call: Any) -> bool:
        """Apply one watch response; False when the watch must be created again."""
        resp = await call.read()
        if resp is grpc.aio.EOF:
            raise CoordinatorUnavailableError("the watch stream ended")
        if resp.compact_revision:
            log.warning("etcd watch of %s: revision %d is compacted (to %d); reloading the metadata",
                        self._name, self._cache.revision + 1, resp.compact_revision)
            revision, kvs = await self._client.range_prefix(self._prefix.encode())
            change = self._cache.reset((self._entry(kv) for kv in kvs), revision)
            self._advance()
            self.notify(change)
            return False
        if resp.canceled:
            raise CoordinatorUnavailableError(f"the watch was cancelled: {resp.cancel_reason}")
        if resp.created:
            self._created.set()
        elif resp.events:
            changes = [(bytes(ev.kv.key).decode()[len(self._prefix):], self._entry(ev.kv) if ev.type == EVENT_PUT
                        else None) for ev in resp.events]
            change = self._cache.apply(changes, max(int(ev.kv.mod_revision) for ev in resp.events))
            self._advance()
            self.notify(change)
            self._notify_puts([key for key, entry in changes if entry is not None])
        else:  # a progress notification: every event up to this revision has been sent
            self._cache.advance(int(resp.header.revision))
            self._advance()
        return True

    async def visible(self, revision: int) -> None:
        """Wait (bounded) until the cache has applied ``revision``."""
        deadline = self._clock() + VISIBLE_TIMEOUT_S
        while self._cache.revision < revision:
            remaining = deadline - self._clock()
            if remaining <= 0:
                log.warning("the metadata cache of %s did not reach revision %d within %g s",
                            self._name, revision, VISIBLE_TIMEOUT_S)
                return
            advanced = self._advanced
            call = self._call
            if call is not None and not self._write_lock.locked():
                async with self._write_lock:
                    try:
                        await self._write(call, EtcdClient.watch_progress())
                    except (grpc.RpcError, grpc.aio.BaseError, asyncio.InvalidStateError, CoordinatorUnavailableError):
                        pass
                    except asyncio.CancelledError:
                        if not replaced_call():
                            raise
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(advanced.wait(), min(remaining, PROGRESS_EVERY_S))
