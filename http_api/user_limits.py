"""The HTTP side of per-user limits and egress pacing (``logbroker.auth.usage``, decision 0178).

Hooks the handlers call (the limits on what a caller creates, ``topics_max`` and
``partitions_max``, and the long-polls a fetch or receive holds while it waits are the front
door's: ``logbroker.api.BrokerApi``): ``stream_slot`` takes a node stream slot and one of the
caller's own, and gives both back as soon as the client is gone (a watcher looks at the
transport every ``DISCONNECT_POLL_S`` and ends the handler, so a slot is not held until the
next write fails); ``paced_write`` charges the bytes a push stream sends to the caller's fetch
quota through the front door and, while the caller is in debt, waits before the next write
instead of dropping anything.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol

from aiohttp import web

from http_api.auth import call_context, metered_topic
from http_api.keys import FRONT_DOOR, STREAMS
from logbroker.api import BrokerApi
from logbroker.api_types import CallContext
from logbroker.errors import NotAvailableError

DISCONNECT_POLL_S: Final = 0.5
PACE_PIECE_S: Final = 0.25
PACE_PIECE_BYTES_MIN: Final = 1024
Opener = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def stream_slot(request: web.Request, open_stream: Opener) -> AsyncIterator[web.StreamResponse]:
    """One of the node's push-stream slots (503 when none is left) and one of the caller's
    (429 past ``streams_max``), held until the stream ends or its client goes away; yields the
    response ``open_stream`` prepared. A client gone ends the block quietly: the handler returns
    the response after it."""
    budget = request.app[STREAMS]
    if budget.used >= budget.limit:
        raise NotAvailableError(f"{budget.used} streams are already open; retry later")
    group = request.match_info.get("group")
    counted_as = f"group:{group}" if group else metered_topic(request)
    with request.app[FRONT_DOOR].streams.held(call_context(request), counted_as):
        budget.used += 1
        handler = asyncio.current_task()
        gone = asyncio.Event()
        watcher = asyncio.create_task(_watch(request, handler, gone))
        try:
            yield await open_stream(request)
        except asyncio.CancelledError:
            if not gone.is_set() or handler is None or handler.uncancel():
                raise  # cancelled for another reason (the node stops): not ours to swallow
        finally:
            budget.used -= 1
            watcher.cancel()


async def _watch(request: web.Request, handler: asyncio.Task[Any] | None, gone: asyncio.Event) -> None:
    """Cancel ``handler`` once the client's connection is closed or closing."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(DISCONNECT_POLL_S)
    gone.set()
    if handler is not None:
        handler.cancel()


class Writer(Protocol):
    """Where ``paced_write`` writes: a streamed response, or a WebSocket's binary messages."""

    async def write(self, data: bytes | bytearray | memoryview) -> None: ...


async def paced_write(front_door: BrokerApi, ctx: CallContext, response: Writer, data: bytes | memoryview, *,
                      topic: str) -> None:
    """Write ``data`` (events of ``topic``) charged to the caller's fetch quota through the front
    door: in pieces of at most a quarter second of it (``PACE_PIECE_S``), each once the quota is
    out of debt, so over any interval a stream sends at most its burst, its rate times the
    interval, and one piece. Counted as the caller's usage either way."""
    rate = ctx.limits.fetch_bytes_per_s
    if not rate:
        await response.write(data)
        front_door.streams.charge_sent(ctx, topic, len(data))
        return
    step = max(PACE_PIECE_BYTES_MIN, int(rate * PACE_PIECE_S))
    view = memoryview(data)
    for start in range(0, len(data), step):
        while (delay := front_door.streams.pause_s(ctx)) > 0:
            await asyncio.sleep(delay)
        piece = view[start:start + step]
        await response.write(piece.tobytes() if len(data) > step else data)
        front_door.streams.charge_sent(ctx, topic, len(piece))
