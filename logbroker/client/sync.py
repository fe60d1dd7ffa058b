"""A thin synchronous wrapper for scripts: the async client on an event loop in a background
thread. ``SyncClient``, ``SyncProducer``, ``SyncConsumer``, ``SyncGroupConsumer`` and
``SyncQueueConsumer`` expose the same methods as their async counterparts (no second hand-kept
copy): coroutine methods block for their result. Push streams (``stream``, ``stream_member``)
are context managers over a blocking iterator of events."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, Final, TypeVar

from logbroker.client.consumer import Consumer
from logbroker.client.core import DEFAULT_URL, Client
from logbroker.client.group_consumer import GroupConsumer
from logbroker.client.producer import Producer
from logbroker.client.queue_consumer import QueueConsumer
from logbroker.client.sse import Event

T = TypeVar("T")
AsyncEvents = contextlib.AbstractAsyncContextManager[AsyncIterator[Event]]
CALL_TIMEOUT_S: Final = 300.0


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="logbroker-client", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=CALL_TIMEOUT_S)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=CALL_TIMEOUT_S)
        self.loop.close()


class _Sync:
    """Proxy: attribute access passes through, coroutine methods run on the loop thread."""

    def __init__(self, target: Any, runner: _LoopThread) -> None:
        self._target = target
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._runner.run(attr(*args, **kwargs))
        return attr


class SyncClient(_Sync):
    def __init__(self, url: str | Sequence[str] = DEFAULT_URL, **settings: Any) -> None:
        """``url``: one URL or several (a list or a comma-separated string), as for ``Client``;
        ``settings`` are ``Client``'s keyword arguments (timeout, credentials, ``ca_file``, retry)."""
        runner = _LoopThread()
        super().__init__(runner.run(_make(Client, url, **settings)), runner)

    def producer(self, **settings: Any) -> SyncProducer:
        return SyncProducer(self._runner.run(_make(Producer, self._target, **settings)), self._runner)

    def consumer(self, **settings: Any) -> SyncConsumer:
        return SyncConsumer(self._runner.run(_make(Consumer, self._target, **settings)), self._runner)

    def group_consumer(self, group: str, topics: list[str], **settings: Any) -> SyncGroupConsumer:
        """A ``GroupConsumer`` (call ``start()`` to join; heartbeats run on the loop thread)."""
        return SyncGroupConsumer(self._runner.run(_make(GroupConsumer, self._target, group, topics, **settings)),
                                 self._runner)

    def queue_consumer(self, queue: str, **settings: Any) -> SyncQueueConsumer:
        return SyncQueueConsumer(self._runner.run(_make(QueueConsumer, self._target, queue, **settings)),
                                 self._runner)

    @contextlib.contextmanager
    def stream(self, topic: str, partition: int, **settings: Any) -> Iterator[Iterator[Event]]:
        """A partition's push stream (``Client.stream``'s keyword arguments): iterate its events."""
        with self._events(self._target.stream(topic, partition, **settings)) as events:
            yield events

    @contextlib.contextmanager
    def stream_member(self, group: str, member_id: str, **settings: Any) -> Iterator[Iterator[Event]]:
        """A group member's push stream (``Client.stream_member``): iterate its events."""
        with self._events(self._target.stream_member(group, member_id, **settings)) as events:
            yield events

    @contextlib.contextmanager
    def _events(self, manager: AsyncEvents) -> Iterator[Iterator[Event]]:
        events = self._runner.run(manager.__aenter__())
        try:
            yield _BlockingEvents(events, self._runner)
        except BaseException as exc:
            if not self._runner.run(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self._runner.run(manager.__aexit__(None, None, None))

    def close(self) -> None:
        self._runner.run(self._target.close())
        self._runner.stop()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncProducer(_Sync):
    def send(self, topic: str, value: bytes | None, **kwargs: Any) -> Any:
        """Buffer a record; returns a ``concurrent.futures.Future`` of its ``RecordMetadata``."""

        async def send_and_wrap() -> Any:
            return await self._target.send(topic, value, **kwargs)

        future = self._runner.run(send_and_wrap())
        return asyncio.run_coroutine_threadsafe(_await(future), self._runner.loop)


class SyncConsumer(_Sync):
    pass


class SyncGroupConsumer(_Sync):
    pass


class SyncQueueConsumer(_Sync):
    pass


class _BlockingEvents:
    """Each ``next`` waits for the stream's next event, as long as the stream lives: the stream
    itself ends when the node sends nothing, not even a keep-alive, for its read timeout. One
    thread reads at a time; a wait interrupted in the caller (Ctrl-C) cancels the read too."""

    def __init__(self, events: AsyncIterator[Event], runner: _LoopThread) -> None:
        self._events, self._runner = events, runner
        self._lock = threading.Lock()

    def __iter__(self) -> _BlockingEvents:
        return self

    def __next__(self) -> Event:
        with self._lock:
            future = asyncio.run_coroutine_threadsafe(_next_event(self._events), self._runner.loop)
            try:
                event = future.result()
            except BaseException:
                future.cancel()
                raise
        if event is None:
            raise StopIteration
        return event


async def _next_event(events: AsyncIterator[Event]) -> Event | None:
    return await anext(events, None)


async def _await(future: asyncio.Future[T]) -> T:
    return await future


async def _make(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """Construct on the loop thread: the async classes create loop-bound primitives."""
    return cls(*args, **kwargs)
