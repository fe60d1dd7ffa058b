"""Produce streams: prebuilt batches over one WebSocket, each answered in order (decision 0254).

A producer that sends a batch per HTTP request pays a request's parsing, its middlewares and its
response headers for every batch, on the node and in the client: more than the append itself
for the small batches of a live producer. A produce stream pays them once, at the upgrade (which
is authenticated, authorized for ``write`` and quota-checked like any produce), then carries each
prebuilt batch (``application/vnd.logbroker.batch``, one per binary message) to the partition.

Every message gets one answer, in the order sent: ``{"seq", "offset", "count"}`` (``seq`` numbers
the messages from 1; ``offset`` is the batch's base offset) or ``{"seq", "error"}`` with the same
problem body an HTTP produce would have answered (nothing of that batch is stored, and the stream
goes on). Answers ready together go out as one text message, a JSON array of them in order (one
write for many, decision 0296); a lone answer is the object itself. Batches are checked and
appended exactly as an HTTP produce of one prebuilt batch: bounds and rows (``check_batch``), the
producer id's owner, the topic's timestamp window, the owner's storage quota, ``acks``.

Pipelined, in order: a message is appended only once the one before it is (so offsets follow the
order sent), but its answer's wait (the fsync of ``flush=always``, the ISR of ``acks=all``)
overlaps the next messages' appends. A message whose answer waits for nothing after its append
(``WritePath.answers_at_append``) is checked, appended and answered by the reading loop itself, with no
task of its own; its answer still queues behind earlier ones that wait. At most ``IN_FLIGHT_MAX``
messages wait for their answers, and a message over ``PIPELINED_BYTES_MAX`` is answered before
the next is read, so a stream holds at most ``IN_FLIGHT_MAX`` small batches or one large one.

Bounds and shares: a message is at most ``request_body_bytes_max`` (larger: the node closes the
stream, code 1009); a stream takes one of the node's stream slots and one of the caller's
(``streams_max``), and is given back as soon as the client goes; each message's bytes are
charged to the caller's produce quota, and while the caller is in debt the next message waits
(the stream is paced, not refused). Access is checked again before every message: a caller whose
token no longer stands, or who lost ``write``, gets the problem as an ``error`` and the stream is
closed (code 1008). A message that is not binary closes the stream (code 1003).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any, Final

from aiohttp import WSCloseCode, WSMsgType, web

from http_api.auth import call_context, reauthenticated
from http_api.errors import problem, problem_for
from http_api.json_codec import decode, encode
from http_api.keys import FRONT_DOOR, NODE
from http_api.params import path_partition, path_topic
from http_api.produce_answers import AnswerQueue
from http_api.records import checked_batch
from http_api.routing import route
from http_api.user_limits import stream_slot
from http_api.websocket_upgrade import upgrade_opener
from logbroker.api_types import Acks, CallContext, Prebuilt
from logbroker.errors import ANY_ERROR, AuthenticationError, ForbiddenError

log = logging.getLogger(__name__)
HEARTBEAT_S: Final = 30.0
REVOKED: Final = (AuthenticationError, ForbiddenError)
CLOSE_REASON_BYTES_MAX: Final = 120
IN_FLIGHT_MAX: Final = 64  # messages of one stream waiting for their answers
PIPELINED_BYTES_MAX: Final = 64 * 1024  # a larger message is answered before the next is read


@route("GET", "/v1/topics/{name}/partitions/{partition}/produce",
       "A produce stream (WebSocket): one prebuilt batch per binary message, each answered in order with "
       "{seq, offset, count} or {seq, error}",
       access="write", quota="produce",
       query=(("acks", "string", "0, 1 (default) or all, for every batch of the stream"),),
       responses={"101": "Switching to the WebSocket protocol", "400": "Not a WebSocket upgrade, or a bad acks",
                  "404": "Unknown topic or partition", "503": "Too many open streams"})
async def produce_stream(request: web.Request) -> web.StreamResponse:
    topic, partition = path_topic(request), path_partition(request)
    acks = await request.app[FRONT_DOOR].streams.open_write(call_context(request), topic, partition,
                                                            request.query.get("acks", "1"))  # 404 before the upgrade
    socket = web.WebSocketResponse(max_msg_size=request.app[NODE].config.request_body_bytes_max,
                                   heartbeat=HEARTBEAT_S)
    accept = upgrade_opener(request, socket, "produce")

    async with stream_slot(request, accept):
        await _serve(request, socket, topic, partition, acks)
    return socket


async def _serve(request: web.Request, socket: web.WebSocketResponse, topic: str, partition: int, acks: Acks) -> None:
    answers = AnswerQueue(IN_FLIGHT_MAX)
    writer = asyncio.create_task(_write_answers(socket, answers))
    try:
        await _read_messages(request, socket, answers, topic, partition, acks)
    finally:
        answers.close()
        try:
            await writer
        except asyncio.CancelledError:
            writer.cancel()
            raise


async def _read_messages(request: web.Request, socket: web.WebSocketResponse, answers: AnswerQueue,
                         topic: str, partition: int, acks: Acks) -> None:
    seq = 0
    async for message in socket:
        if message.type != WSMsgType.BINARY:
            await answers.drained()
            await socket.close(code=WSCloseCode.UNSUPPORTED_DATA,
                               message=b"a produce stream carries one prebuilt batch per binary message")
            return
        seq += 1
        front_door = request.app[FRONT_DOOR]
        try:
            ctx = await reauthenticated(request)
            await front_door.authorize(ctx, topic, "write")
        except REVOKED as exc:
            await answers.put(_answered(_error(seq, exc)))
            await answers.drained()
            await socket.close(code=WSCloseCode.POLICY_VIOLATION, message=str(exc).encode()[:CLOSE_REASON_BYTES_MAX])
            return
        if front_door.streams.answers_at_append(topic, partition, acks):
            # Nothing waits after the append: answered here, in order, without a task of its own.
            answer = await _append(request, ctx, topic, partition, acks, seq, message.data, _nothing)
            if answers.idle():
                await _send(socket, answer)
            else:
                await answers.put(_answered(answer))
            continue
        appended = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(_append(request, ctx, topic, partition, acks, seq, message.data,
                                           functools.partial(_resolve, appended)))
        task.add_done_callback(functools.partial(_resolve_when_done, appended))
        await answers.put(task)
        if len(message.data) > PIPELINED_BYTES_MAX:
            await task
        else:
            await appended


async def _write_answers(socket: web.WebSocketResponse, answers: AnswerQueue) -> None:
    """Send answers in order, those ready together as one message; once the socket fails, the
    remaining ones are awaited (their appends finish) and dropped."""
    while (ready := await answers.ready()) is not None:
        await _send(socket, ready[0] if len(ready) == 1 else b"[" + b",".join(ready) + b"]")


async def _send(socket: web.WebSocketResponse, frame: bytes) -> None:
    """One text message of answers; dropped when the socket is closed or fails."""
    if socket.closed:
        return
    with contextlib.suppress(ConnectionError, RuntimeError):
        await socket.send_frame(frame, WSMsgType.TEXT)


def _nothing() -> None:
    return None


async def _append(request: web.Request, ctx: CallContext, topic: str, partition: int, acks: Acks, seq: int,
                  batch: bytes, on_appended: Callable[[], None]) -> bytes:
    """One message through the front door (paced and charged there, checked as an HTTP produce
    of one prebuilt batch is): the answer to send back."""
    try:
        offsets, checked = await request.app[FRONT_DOOR].streams.publish(
            ctx, topic, _Message(request, partition, batch), acks, on_appended=on_appended)
    except ANY_ERROR as exc:
        return _error(seq, exc)
    except Exception:
        log.exception("unhandled error in a produce stream's message", extra={"fields": {"topic": topic}})
        return _answer_of(seq, problem(500, "internal error", code="internal"))
    return encode({"seq": seq, "offset": offsets[0]["offset"], "count": checked.header.record_count})


class _Message:
    """A produce stream's binary message as the front door's ``Payload``: one prebuilt batch,
    checked in the decode pool when that pays (``checked_batch``)."""

    def __init__(self, request: web.Request, partition: int, batch: bytes) -> None:
        self._request, self._partition, self._batch = request, partition, batch

    def received_bytes(self) -> int:
        return len(self._batch)

    async def decode(self) -> Prebuilt:
        return Prebuilt(self._partition, self._batch, await checked_batch(self._request, self._batch))


def _resolve(appended: asyncio.Future[None]) -> None:
    if not appended.done():
        appended.set_result(None)


def _resolve_when_done(appended: asyncio.Future[None], _task: asyncio.Task[bytes]) -> None:
    _resolve(appended)


def _answered(answer: bytes) -> asyncio.Future[bytes]:
    done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    done.set_result(answer)
    return done


def _error(seq: int, exc: Exception) -> bytes:
    return _answer_of(seq, problem_for(exc))


def _answer_of(seq: int, response: web.Response) -> bytes:
    body = response.body
    assert isinstance(body, bytes)
    details: Any = decode(body)
    return encode({"seq": seq, "error": details})
