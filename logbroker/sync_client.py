"""A thin synchronous wrapper for scripts: the async client on an event loop in a background
thread. ``SyncClient``, ``SyncProducer``, ``SyncConsumer``, ``SyncGroupConsumer`` and
``SyncQueueConsumer`` expose the same methods as their async counterparts (no second hand-kept
copy): coroutine methods block for their result. Push streams are async only."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

from logbroker.client import DEFAULT_URL, Client, Consumer, GroupConsumer, Producer, QueueConsumer

T = TypeVar("T")
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
    def __init__(self, url: str = DEFAULT_URL, **settings: Any) -> None:
        """``settings`` are ``Client``'s keyword arguments (timeout, credentials, ``ca_file``)."""
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


async def _await(future: asyncio.Future[T]) -> T:
    return await future


async def _make(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """Construct on the loop thread: the async classes create loop-bound primitives."""
    return cls(*args, **kwargs)
