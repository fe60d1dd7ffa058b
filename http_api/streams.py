"""Push streams as Server-Sent Events (decision 0142): a partition from an offset, or a group
member's assigned partitions from the group's committed offsets.

Back-pressure: the handler reads at most ``STREAM_READ_BYTES`` of log at a time and does not read
again until ``response.write`` has handed the previous chunk to the socket (aiohttp waits for the
transport to drain above its high-water mark), so a slow client costs the node one chunk, not an
unbounded buffer. A chunk is decoded and written ``EVENTS_PER_WRITE`` records at a time, off the
event loop when it is large or compressed (a few compressed bytes can stand for a hundred thousand
records), on it when it is small (decision 0251: the hop cost more than the work). Idle streams get a
comment line every ``keepalive`` interval. The number of open streams is bounded per node (503
beyond it) and per user (429), a gone client frees its slot at once, and the bytes sent are
charged to the caller's fetch quota (``http_api.user_limits``).

A stored batch whose records cannot be decoded (decision 0220) becomes a ``skipped`` event in its
place (``first_offset``, ``next_offset``, ``reason``; id: its last offset) and the stream goes on.

Access is checked again before every delivery and at least every ``access_recheck_ms`` (a node
setting, 5 s by default) while a stream idles: a caller whose token no longer stands or who lost
read on a topic gets an ``error`` event with the problem body (401 or 403) and the stream ends
(decision 0175).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from typing import Any, Final

from aiohttp import web

from http_api.auth import call_context, reauthenticated
from http_api.decoding import DECODER
from http_api.errors import problem_for
from http_api.json_codec import encode
from http_api.keys import FRONT_DOOR, NODE
from http_api.params import (
    ENCODING_QUERY,
    INT64_MAX,
    RACK_QUERY,
    ascii_int,
    path_partition,
    path_topic,
    query_base64,
    query_int,
    query_rack,
)
from http_api.routing import route
from http_api.user_limits import paced_write, stream_slot
from logbroker.api_types import CallContext
from logbroker.batch_limits import is_costly_read
from logbroker.errors import ANY_ERROR, AuthenticationError, ForbiddenError, InvalidRequestError
from logbroker.groups.requests import group_name, member_id
from logbroker.records import Skipped, iter_fetched_records, render_records
from logbroker.unreadable import report_skipped
from segments.log import LogRead

STREAM_READ_BYTES: Final = 256 * 1024
EVENTS_PER_WRITE: Final = 1_000
KEEPALIVE_MS: Final = 5_000
EVENT_STREAM: Final = "text/event-stream"
LAST_EVENT_ID: Final = "Last-Event-ID"
CLOSED: Final = (ConnectionResetError, ConnectionError)
REVOKED: Final = (AuthenticationError, ForbiddenError)


def _event(kind: str, data: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\nevent: {kind}\ndata: " if event_id is not None else f"event: {kind}\ndata: "
    return b"".join((head.encode(), encode(data), b"\n\n"))


def _record_events(result: LogRead, offset: int, topic: str | None, partition: int,
                   force_base64: bool, skipped: list[Skipped]) -> Iterator[bytes]:
    """SSE ``record`` events of the records at or after ``offset`` in ``result`` (id: the offset),
    ``EVENTS_PER_WRITE`` at a time, each piece decoded only when it is asked for. A stored batch
    whose records cannot be decoded becomes a ``skipped`` event in its place (id: its last offset,
    so a stream resumed after it goes on past it), and is appended to ``skipped``."""
    records = iter_fetched_records(result.data, offset, skipped)
    where = {} if topic is None else {"topic": topic, "partition": partition}
    reported = 0
    parts: list[bytes] = []
    for record in records:
        for skip in skipped[reported:]:
            parts.append(_event("skipped", {**skip.to_json(), **where}, str(skip.next_offset - 1)))
        reported = len(skipped)
        rendered = render_records([record], force_base64=force_base64)[0]
        rendered.update(where)
        parts.append(_event("record", rendered, str(record.offset)))
        if len(parts) >= EVENTS_PER_WRITE:
            yield b"".join(parts)
            parts = []
    for skip in skipped[reported:]:
        parts.append(_event("skipped", {**skip.to_json(), **where}, str(skip.next_offset - 1)))
    if parts:
        yield b"".join(parts)


async def _write_records(request: web.Request, ctx: CallContext, response: web.StreamResponse, result: LogRead,
                         offset: int, topic: str, partition: int, force_base64: bool, *, named: bool) -> None:
    """Write the events of ``result`` a piece at a time: each piece is decoded and rendered (in the
    decode pool unless the read is small, ``is_costly_read``), and the next one only once the
    socket has taken this one (back-pressure). With
    ``named`` each event names its topic and partition (a member's stream of several)."""
    skipped: list[Skipped] = []
    pieces = _record_events(result, offset, topic if named else None, partition, force_base64, skipped)
    inline = not is_costly_read(result.data)
    while (piece := await request.app[DECODER].run(next, pieces, None, inline=inline)) is not None:
        await paced_write(request.app[FRONT_DOOR], ctx, response, piece, topic=topic)
    request.app[FRONT_DOOR].streams.charge_sent(ctx, topic, 0, max(0, result.next_offset - offset))
    if skipped:
        report_skipped(request.app[NODE].metrics.count_skipped, topic, partition, skipped, "stream")


async def _open(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.content_type = EVENT_STREAM
    await response.prepare(request)
    return response


def _start_offset(request: web.Request) -> int | None:
    resume = request.headers.get(LAST_EVENT_ID)
    if resume is not None:
        return ascii_int(resume, LAST_EVENT_ID, 0, INT64_MAX - 1) + 1
    if "offset" not in request.query:
        return None
    return query_int(request, "offset")


@route("GET", "/v1/topics/{name}/partitions/{partition}/stream",
       "Push records from an offset as they arrive (Server-Sent Events, one `record` event per record)",
       access="read",
       query=(("offset", "integer", "first offset (default: the end); Last-Event-ID resumes after an id"),
              ("keepalive_ms", "integer", "idle comment interval (default 5000)"),
              RACK_QUERY, ENCODING_QUERY),
       headers=((LAST_EVENT_ID, "integer", "the id of the last event received: resume after it (instead of offset)"),),
       responses={"200": "text/event-stream", "404": "Unknown topic or partition", "416": "Offset out of range",
                  "503": "Too many open streams"})
async def stream_partition(request: web.Request) -> web.StreamResponse:
    front_door, ctx = request.app[FRONT_DOOR], call_context(request)
    topic, partition = path_topic(request), path_partition(request)
    keepalive_ms = query_int(request, "keepalive_ms", default=KEEPALIVE_MS, low=10, high=60_000)
    start = _start_offset(request)
    rack = query_rack(request)
    force_base64 = query_base64(request)
    offset = start if start is not None else await front_door.streams.start(ctx, topic, partition, "latest")
    read = functools.partial(front_door.streams.read, topic=topic, partition=partition, max_bytes=STREAM_READ_BYTES,
                             rack=rack)
    result = await read(ctx, offset=offset, wait_ms=0)  # 404/416 before streaming
    wait_ms = min(keepalive_ms, request.app[NODE].config.access_recheck_ms)
    async with stream_slot(request, _open) as response:
        try:
            written = time.monotonic()
            while True:
                ctx = await reauthenticated(request)
                await front_door.authorize(ctx, topic, "read")
                if result.data:
                    await _write_records(request, ctx, response, result, offset, topic, partition, force_base64,
                                         named=False)
                    offset = result.next_offset
                    written = time.monotonic()
                elif (time.monotonic() - written) * 1000 >= keepalive_ms - 1:
                    await response.write(b": keep-alive\n\n")
                    written = time.monotonic()
                result = await read(ctx, offset=offset, wait_ms=wait_ms)
        except CLOSED:
            return response
        except REVOKED as exc:
            await _refuse(response, exc)
        except ANY_ERROR as exc:  # the node stops, the topic goes, a batch cannot be decoded, ...
            await _end(response, str(exc))
        return response
    return response  # the client went away (stream_slot ended the block): the stream it had is the answer


async def _refuse(response: web.StreamResponse, exc: Exception) -> None:
    """End a stream whose caller lost access: an ``error`` event with the problem body, then EOF."""
    body = problem_for(exc).body
    assert isinstance(body, bytes)
    try:
        await response.write(_event("error", json.loads(body)))
        await response.write_eof()
    except CLOSED:
        pass


async def _end(response: web.StreamResponse, reason: str) -> None:
    try:
        await response.write(_event("end", {"reason": reason}))
        await response.write_eof()
    except CLOSED:
        pass


@route("GET", "/v1/groups/{group}/members/{member}/stream",
       "Push the records of a member's assigned partitions (Server-Sent Events; the open stream heartbeats)",
       access="group_read",
       query=(("auto_offset_reset", "string", "earliest (default) or latest, where nothing is committed"),
              RACK_QUERY, ENCODING_QUERY),
       responses={"200": "text/event-stream: `assignment` events at each generation, then `record` events with "
                         "topic and partition", "404": "Unknown group or member", "503": "Too many open streams"})
async def stream_member(request: web.Request) -> web.StreamResponse:
    front_door = request.app[FRONT_DOOR]
    group, member = group_name(request.match_info["group"]), member_id(request.match_info["member"])
    reset = request.query.get("auto_offset_reset", "earliest")
    if reset not in ("earliest", "latest"):
        raise InvalidRequestError("auto_offset_reset must be earliest or latest")
    rack = query_rack(request)
    force_base64 = query_base64(request)
    ctx = call_context(request)
    view = await front_door.group_heartbeat(ctx, group, member)  # 404 before streaming
    await front_door.authorize_each(ctx, view["assignment"], "read")
    async with stream_slot(request, _open) as response:
        try:
            await _member_loop(request, response, group, member, reset, view, rack, force_base64)
        except CLOSED:
            return response
        except REVOKED as exc:
            await _refuse(response, exc)
        except ANY_ERROR as exc:  # removed from the group, no longer allowed, the node stops, ...
            await _end(response, str(exc))
        return response
    return response  # the client went away (stream_slot ended the block): the stream it had is the answer


async def _member_loop(request: web.Request, response: web.StreamResponse, group: str, member: str, reset: str,
                       view: dict[str, Any], rack: str | None, force_base64: bool) -> None:
    front_door = request.app[FRONT_DOOR]
    recheck_ms = request.app[NODE].config.access_recheck_ms
    generation = -1
    positions: dict[tuple[str, int], int] = {}
    while True:
        ctx = await reauthenticated(request)
        await front_door.authorize_group(ctx, group, "read")
        await front_door.authorize_each(ctx, view["assignment"], "read")
        if view["generation"] != generation:
            generation = view["generation"]
            positions = await front_door.streams.member_positions(ctx, group, view["assignment"], positions, reset)
            await response.write(_event("assignment", {"generation": generation, "assignment": view["assignment"],
                                                       "positions": [[t, p, o] for (t, p), o in positions.items()]}))
        sent = False
        for (topic, p), offset in positions.items():
            result = await front_door.streams.read(ctx, topic, p, offset, max_bytes=STREAM_READ_BYTES, wait_ms=0,
                                                   rack=rack)
            if result.data:
                await _write_records(request, ctx, response, result, offset, topic, p, force_base64, named=True)
                positions[(topic, p)] = result.next_offset
                sent = True
        if not sent:
            await response.write(b": keep-alive\n\n")
            await front_door.streams.wait(ctx, [(t, p, o) for (t, p), o in positions.items()],
                                          min(view["heartbeat_interval_ms"], recheck_ms))
        view = await front_door.group_heartbeat(ctx, group, member)
