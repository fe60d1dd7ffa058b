"""Subscribe streams: a partition's stored batches pushed over one WebSocket as they are appended
(decision 0379), the binary twin of the push stream (``http_api.streams``, Server-Sent Events).

A push stream renders every record as JSON and its client parses it back, which for a live tail
of small batches costs more than everything else the node does for them. A subscribe stream sends
what a binary fetch (``Accept: application/vnd.logbroker.batch``) would: whole stored batches,
back to back, as they are in the log (opened when encrypted at rest), one binary message per
read; the client decodes them as it decodes a fetch (checksums, columns, records it cannot decode
passed over as data loss). The node never reads the client's messages for data: anything but a
close ends the stream (code 1003).

The rules of the push stream hold: 404/416 before the upgrade, one of the node's stream slots and
one of the caller's, access checked again before every delivery and at least every
``access_recheck_ms`` while idle (a caller who lost it gets a text message with the problem, then
close code 1008), the bytes charged to the caller's fetch quota and paced by it, at most
``SUBSCRIBE_READ_BYTES`` read ahead of what the socket took (aiohttp waits for the transport to
drain before ``send_bytes`` returns). A failure of the read (the node stops, the topic goes) is a
close with code 1011 and its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Final

from aiohttp import WSCloseCode, WSMsgType, web

from http_api.auth import call_context, reauthenticated
from http_api.errors import problem_for
from http_api.keys import FRONT_DOOR, NODE
from http_api.params import RACK_QUERY, path_partition, path_topic, query_int, query_rack
from http_api.routing import route
from http_api.user_limits import paced_write, stream_slot
from http_api.websocket_upgrade import upgrade_opener
from logbroker.errors import ANY_ERROR, AuthenticationError, ForbiddenError

SUBSCRIBE_READ_BYTES: Final = 256 * 1024
HEARTBEAT_S: Final = 30.0
CLIENT_MESSAGE_BYTES_MAX: Final = 4 * 1024  # the client sends nothing but control frames
CLOSE_REASON_BYTES_MAX: Final = 120
REVOKED: Final = (AuthenticationError, ForbiddenError)
CLOSED: Final = (ConnectionResetError, ConnectionError)


class _Frames:
    """``paced_write``'s writer for a WebSocket: each piece is one binary message."""

    def __init__(self, socket: web.WebSocketResponse) -> None:
        self._socket = socket

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        await self._socket.send_bytes(data if isinstance(data, bytes) else bytes(data))


@route("GET", "/v1/topics/{name}/partitions/{partition}/subscribe",
       "A subscribe stream (WebSocket): the partition's stored batches from an offset, pushed as they are "
       "appended, one binary message of whole batches per read (decode as a binary fetch)",
       access="read",
       query=(("offset", "integer", "first offset (default: the end)"), RACK_QUERY),
       responses={"101": "Switching to the WebSocket protocol", "400": "Not a WebSocket upgrade",
                  "404": "Unknown topic or partition", "416": "Offset out of range",
                  "503": "Too many open streams"})
async def subscribe_stream(request: web.Request) -> web.StreamResponse:
    front_door, ctx = request.app[FRONT_DOOR], call_context(request)
    topic, partition = path_topic(request), path_partition(request)
    rack = query_rack(request)
    if "offset" in request.query:
        offset = query_int(request, "offset")
    else:
        offset = await front_door.streams.start(ctx, topic, partition, "latest")
    read = functools.partial(front_door.streams.read, topic=topic, partition=partition,
                             max_bytes=SUBSCRIBE_READ_BYTES, rack=rack)
    result = await read(ctx, offset=offset, wait_ms=0)  # 404/416 before the upgrade
    socket = web.WebSocketResponse(max_msg_size=CLIENT_MESSAGE_BYTES_MAX, heartbeat=HEARTBEAT_S)
    accept = upgrade_opener(request, socket, "subscribe")

    wait_ms = request.app[NODE].config.access_recheck_ms
    frames = _Frames(socket)
    async with stream_slot(request, accept):
        listener = asyncio.create_task(_close_on_client_message(socket))
        try:
            while not socket.closed:
                ctx = await reauthenticated(request)
                await front_door.authorize(ctx, topic, "read")
                if result.data:
                    await paced_write(front_door, ctx, frames, result.data, topic=topic)
                    front_door.streams.charge_sent(ctx, topic, 0, max(0, result.next_offset - offset))
                    offset = result.next_offset
                result = await read(ctx, offset=offset, wait_ms=wait_ms)
        except CLOSED:
            return socket
        except REVOKED as exc:
            await _refuse(socket, exc)
        except ANY_ERROR as exc:  # the node stops, the topic goes, ...
            await socket.close(code=WSCloseCode.INTERNAL_ERROR, message=str(exc).encode()[:CLOSE_REASON_BYTES_MAX])
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
    return socket


async def _close_on_client_message(socket: web.WebSocketResponse) -> None:
    """Read what the client sends: aiohttp answers pings and a close while it reads; a data
    message is not part of the protocol and closes the stream (code 1003)."""
    async for message in socket:
        if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
            await socket.close(code=WSCloseCode.UNSUPPORTED_DATA,
                               message=b"a subscribe stream takes no messages from the client")
            return


async def _refuse(socket: web.WebSocketResponse, exc: Exception) -> None:
    """End a stream whose caller lost access: the problem as a text message, then close (1008)."""
    body = problem_for(exc).body
    assert isinstance(body, bytes)
    with contextlib.suppress(*CLOSED):
        await socket.send_str(body.decode())
        await socket.close(code=WSCloseCode.POLICY_VIOLATION, message=str(exc).encode()[:CLOSE_REASON_BYTES_MAX])
