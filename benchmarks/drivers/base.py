"""What every system's driver does, so each scenario is written once for all systems.

A driver wraps one system's own Python client with that system's best-known settings (stated in
``settings()`` and copied into every result file). Timing is the scenario's job, not the
driver's: a driver call does the work and returns counts. Every wait is bounded by
``OP_TIMEOUT_S`` or by a deadline the caller passes.
"""

from __future__ import annotations

import abc
import asyncio
import struct
import time
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Final

from benchmarks.servers import Endpoint

OP_TIMEOUT_S: Final = 120.0
STAMP: Final = struct.Struct("<q")   # send time (time.time_ns) at the start of a latency payload


def stamped(pad: bytes) -> bytes:
    """A latency payload: the send time in ns, then ``pad``."""
    return STAMP.pack(time.time_ns()) + pad


def latency_ms(payload: bytes | memoryview, now_ns: int) -> float:
    sent_ns: int = STAMP.unpack_from(payload)[0]
    return (now_ns - sent_ns) / 1e6


class Driver(abc.ABC):
    system: ClassVar[str]
    # None when the system can fsync every acknowledged write; otherwise why it cannot.
    fsync_unsupported: ClassVar[str | None] = None

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._deferred: list[Coroutine[Any, Any, Any]] = []

    def defer(self, cleanup: Coroutine[Any, Any, Any]) -> None:
        """Run ``cleanup`` (closing a consumer, say) at the next ``settle()``, outside the timed
        section: some clients take long to close, which is not part of what a figure measures."""
        self._deferred.append(cleanup)

    async def settle(self) -> None:
        """Run the deferred clean-ups; scenarios call this after each timed section."""
        deferred, self._deferred = self._deferred, []
        async with asyncio.timeout(OP_TIMEOUT_S):
            for cleanup in deferred:
                await cleanup

    async def __aenter__(self) -> Driver:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abc.abstractmethod
    async def connect(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    def settings(self) -> dict[str, Any]:
        """Client version and every client and durability setting, for the report."""

    @abc.abstractmethod
    async def create_log(self, name: str, *, fsync: bool = False) -> None:
        """A topic / stream of one partition (with ``fsync``: acknowledged writes are fsync'd)."""

    @abc.abstractmethod
    async def prepare_sends(self, log: str) -> None:
        """Open what paced sends to ``log`` use (a connection, a stream) before they are timed."""

    @abc.abstractmethod
    async def publish_one(self, log: str, payload: bytes) -> None:
        """Publish one record the way an application publishing an event at a time would, and
        return once it is acknowledged (a round trip: nothing pipelined, nothing batched)."""

    @abc.abstractmethod
    async def produce(self, log: str, payload: bytes, count: int, *, fsync: bool = False) -> int:
        """Append ``count`` copies of ``payload`` with the best pipelining; return once every one
        is acknowledged. Returns the number acknowledged."""

    @abc.abstractmethod
    async def consume(self, log: str, count: int) -> int:
        """Read the log from its start until ``count`` records were delivered (each one handed
        to the caller's code as the client delivers it). Returns the records read."""

    @abc.abstractmethod
    async def send_now(self, log: str, payloads: list[bytes]) -> None:
        """Paced sending: hand these records to the client at once (a bounded number in flight)."""

    @abc.abstractmethod
    async def flush_sends(self) -> None:
        """Wait until everything ``send_now`` handed over is acknowledged."""

    @abc.abstractmethod
    async def receive_latencies(self, log: str, count: int, ready: Callable[[], None],
                                deadline_s: float) -> list[float]:
        """Follow the log's tail; call ``ready`` once subscribed; return the end-to-end latency
        (ms) of each record received, until ``count`` or ``deadline_s`` (monotonic)."""

    @abc.abstractmethod
    async def hold_idle(self, log: str, consumers: int, ready: Callable[[], None], stop: asyncio.Event) -> int:
        """Open ``consumers`` separate connections, each waiting for records on ``log`` (which
        stays empty) the way that system's consumers wait; call ``ready`` once all are waiting;
        hold them until ``stop``. Returns how many were waiting."""

    async def queue_unavailable(self) -> str | None:
        """None when the system has queues with per-message acks; otherwise why not."""
        return None

    @abc.abstractmethod
    async def create_queue(self, name: str) -> None: ...

    @abc.abstractmethod
    async def queue_send(self, name: str, payload: bytes, count: int) -> int:
        """Enqueue ``count`` copies of ``payload`` durably, pipelined; returns how many were confirmed."""

    @abc.abstractmethod
    async def queue_receive_ack(self, name: str, count: int) -> int:
        """Receive and acknowledge ``count`` messages; returns how many were acknowledged."""
