"""Produce streams: prebuilt batches over one WebSocket, each answered in order (decision 0254).

A producer that sends a batch per HTTP request pays a request's parsing, its middlewares and its
response headers for every batch, on the node and in the client: more than the append itself
for the small batches of a live producer. A produce stream pays them once, at the upgrade (which
is authenticated, authorized for ``write`` and quota-checked like any produce), then carries each
prebuilt batch (``application/vnd.logbroker.batch``, one per binary message) to the partition.

Every message gets one text message back, in the order sent: ``{"seq", "offset", "count"}``
(``seq`` numbers the messages from 1; ``offset`` is the batch's base offset) or ``{"seq",
"error"}`` with the same problem body an HTTP produce would have answered (nothing of that batch
is stored, and the stream goes on). Batches are checked and appended exactly as an HTTP produce of
one prebuilt batch: bounds and rows (``check_batch``), the producer id's owner, the topic's
timestamp window, the owner's storage quota, ``acks``. Messages are taken one at a time: the next
is read once the previous one is answered, so order is kept and a stream holds one batch.

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
from typing import Any, Final

from aiohttp import WSCloseCode, WSMsgType, web

from http_api.auth import limits_of, principal_of, recheck_access
from http_api.errors import problem_for
from http_api.json_codec import decode, encode
from http_api.keys import NODE
from http_api.params import path_partition, path_topic
from http_api.records import append_prebuilt
from http_api.routing import route
from http_api.user_limits import stream_slot
from logbroker.errors import ANY_ERROR, AuthenticationError, ForbiddenError, InvalidRequestError

ACKS: Final = ("0", "1", "all")
HEARTBEAT_S: Final = 30.0
REVOKED: Final = (AuthenticationError, ForbiddenError)
CLOSE_REASON_BYTES_MAX: Final = 120


@route("GET", "/v1/topics/{name}/partitions/{partition}/produce",
       "A produce stream (WebSocket): one prebuilt batch per binary message, each answered in order with "
       "{seq, offset, count} or {seq, error}",
       access="write", quota="produce",
       query=(("acks", "string", "0, 1 (default) or all, for every batch of the stream"),),
       responses={"101": "Switching to the WebSocket protocol", "400": "Not a WebSocket upgrade, or a bad acks",
                  "404": "Unknown topic or partition", "503": "Too many open streams"})
async def produce_stream(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE]
    topic, partition = path_topic(request), path_partition(request)
    acks = request.query.get("acks", "1")
    if acks not in ACKS:
        raise InvalidRequestError(f"acks must be one of {', '.join(ACKS)}")
    await node.list_offset(topic, partition, "latest")  # 404 before the upgrade
    socket = web.WebSocketResponse(max_msg_size=node.config.request_body_bytes_max, heartbeat=HEARTBEAT_S)
    if not socket.can_prepare(request).ok:
        raise InvalidRequestError("a produce stream is a WebSocket: send the upgrade headers "
                                  "(Connection: Upgrade, Upgrade: websocket)")

    async def accept(req: web.Request) -> web.StreamResponse:
        await socket.prepare(req)
        return socket

    async with stream_slot(request, accept):
        await _serve(request, socket, topic, partition, acks)
    return socket


async def _serve(request: web.Request, socket: web.WebSocketResponse, topic: str, partition: int, acks: str) -> None:
    seq = 0
    async for message in socket:
        if message.type != WSMsgType.BINARY:
            await socket.close(code=WSCloseCode.UNSUPPORTED_DATA,
                               message=b"a produce stream carries one prebuilt batch per binary message")
            return
        seq += 1
        try:
            await recheck_access(request)
        except REVOKED as exc:
            await socket.send_frame(_error(seq, exc), WSMsgType.TEXT)
            await socket.close(code=WSCloseCode.POLICY_VIOLATION, message=str(exc).encode()[:CLOSE_REASON_BYTES_MAX])
            return
        await socket.send_frame(await _append(request, topic, partition, acks, seq, message.data), WSMsgType.TEXT)


async def _append(request: web.Request, topic: str, partition: int, acks: str, seq: int, batch: bytes) -> bytes:
    """One message: paced by the caller's produce quota, checked as an HTTP produce is, appended;
    the answer to send back. Refused or not, its bytes are charged (a large invalid one is not free)."""
    auth = request.app[NODE].auth
    principal, limits = principal_of(request), limits_of(request)
    if auth.enabled:
        while (delay := auth.quotas.delay_s(principal.name, "produce", limits)) > 0:
            await asyncio.sleep(delay)
    try:
        offsets, checked = await append_prebuilt(request, topic, partition, batch, acks)
    except ANY_ERROR as exc:
        return _error(seq, exc)
    finally:
        if auth.enabled:
            auth.quotas.charge(principal.name, "produce", limits, len(batch))
    return encode({"seq": seq, "offset": offsets[0]["offset"], "count": checked.header.record_count})


def _error(seq: int, exc: Exception) -> bytes:
    body = problem_for(exc).body
    assert isinstance(body, bytes)
    problem: Any = decode(body)
    return encode({"seq": seq, "error": problem})
