"""Queues: send, receive with a visibility timeout, ack, nack (DESIGN §4), and the queue's state.

Each route is served by the broker's front door (``logbroker.api.BrokerApi``, decision 0402),
which authorizes the call, checks and charges the quota and calls the node; these handlers read
the request and render the answer. A body is read when the front door asks for it (after the
caller was authorized), within ``body_timeout_ms`` (``http_api.bodies.read_body``).

Receive, ack and nack also speak msgpack (``Content-Type``/``Accept: application/x-msgpack``, bytes
as bytes), which the Python client uses: no base64 and no JSON on the hot path."""

from __future__ import annotations

from typing import Any

import msgpack
from aiohttp import web

from http_api.auth import call_context, recheck_access
from http_api.bodies import read_body
from http_api.json_codec import json_response
from http_api.keys import FRONT_DOOR
from http_api.params import JSON, MSGPACK, decode_msgpack, read_json
from http_api.records import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY, PRODUCE_BODY
from http_api.routing import route
from logbroker.api_types import Answered
from logbroker.errors import UnsupportedMediaTypeError
from logbroker.queues.requests import (
    NACK_DELAY_MS_MAX,
    RECEIPT,
    RECEIPTS_PER_REQUEST_MAX,
    ReceiveRequest,
)
from logbroker.records import IncomingRecord, parse_body

QUEUE_PATH = "/v1/queues/{name}"
RECEIVE_BODY = {"type": "object", "properties": {
    "max_messages": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
    "visibility_timeout_ms": {"type": "integer", "description": "default: the queue's visibility_timeout_ms"},
    "wait_ms": {"type": "integer", "default": 0, "description": "wait this long for a message"}}}
RECEIPTS_BODY = {"type": "object", "required": ["receipts"], "properties": {
    "receipts": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": f"^{RECEIPT.pattern}$"},
                 "description": f"at most {RECEIPTS_PER_REQUEST_MAX}, each once"},
    "delay_ms": {"type": "integer", "minimum": 0, "maximum": NACK_DELAY_MS_MAX,
                 "description": "nack only: redeliver after this delay"}}}
SETTLE_RESPONSES = {"200": "How many were settled, and the receipts that matched no current lease",
                    "400": "Malformed body or receipt (nothing settled)", "404": "Unknown queue",
                    "409": "Not a queue"}


@route("POST", QUEUE_PATH + "/messages", "Send messages to a queue (the produce body)", access="write",
       quota="produce", front_door="queue_send", body=PRODUCE_BODY,
       query=(("acks", "string", "0, 1 (default) or all"),), headers=(IDEMPOTENCY_HEADER,),
       responses={"200": "Offsets", "400": "Invalid", "403": "Not allowed, or past the queue owner's "
                  "storage_bytes_max (storage_quota_exceeded)", "404": "Unknown queue",
                  "409": "Not a queue, or the Idempotency-Key was used for other messages (idempotency_conflict)"})
async def send(request: web.Request) -> web.Response:
    sent = await request.app[FRONT_DOOR].queue_send(call_context(request), request.match_info["name"],
                                                    _Messages(request), request.query.get("acks", "1"),
                                                    idempotency_key=request.headers.get(IDEMPOTENCY_KEY))
    return json_response({"offsets": sent.offsets})


class _Messages:
    """A send's body for the front door (``logbroker.api_types.QueuePayload``): JSON or msgpack records."""

    def __init__(self, request: web.Request) -> None:
        self.request = request

    def received_bytes(self) -> int:
        return self.request.content.total_bytes

    async def receive(self) -> None:
        if self.request.body_exists:
            await read_body(self.request)

    async def decode(self) -> list[IncomingRecord]:
        request = self.request
        if request.content_type == JSON:
            return parse_body(await read_json(request), binary=False)
        if request.content_type == MSGPACK:
            return parse_body(decode_msgpack(await request.read()), binary=True)
        raise UnsupportedMediaTypeError(f"expected {JSON} or {MSGPACK}, got {request.content_type!r}")


@route("POST", QUEUE_PATH + "/receive", "Receive messages, each leased for the visibility timeout "
       "(Accept: application/x-msgpack for a msgpack answer with bytes)", access="read", quota="fetch",
       front_door="queue_receive", body=RECEIVE_BODY,
       responses={"200": "messages with receipts", "400": "Invalid", "404": "Unknown queue", "409": "Not a queue"})
async def receive(request: web.Request) -> web.Response:
    binary = MSGPACK in request.headers.get("Accept", "")

    async def body() -> Any:
        return await _read_body(request) if request.body_exists else {}

    async def answer(asked: ReceiveRequest, messages: list[dict[str, Any]]) -> Answered[web.Response]:
        if asked.wait_ms:  # a long-poll: refused if access was revoked while it waited; what it leased
            await recheck_access(request)  # comes back when the visibility timeout runs out (decision 0175)
        if binary:
            response = web.Response(body=msgpack.packb({"messages": messages}, use_bin_type=True),
                                    content_type=MSGPACK)
        else:
            response = json_response({"messages": messages})
        return Answered(response, response.content_length or 0, len(messages))

    return await request.app[FRONT_DOOR].queue_receive(call_context(request), request.match_info["name"], body,
                                                       binary=binary, answer=answer)


async def _read_body(request: web.Request) -> Any:
    """A JSON or msgpack body (receive, ack and nack take either), within ``body_timeout_ms``."""
    if request.body_exists:
        await read_body(request)
    if request.content_type == MSGPACK:
        return decode_msgpack(await request.read())
    return await read_json(request)


@route("POST", QUEUE_PATH + "/ack", "Acknowledge messages by receipt", access="read",
       front_door="queue_settle", body=RECEIPTS_BODY, responses=SETTLE_RESPONSES)
async def ack(request: web.Request) -> web.Response:
    return json_response(await request.app[FRONT_DOOR].queue_ack(call_context(request), request.match_info["name"],
                                                                 lambda: _read_body(request)))


@route("POST", QUEUE_PATH + "/nack", "Give messages back (redelivered after delay_ms)", access="read",
       front_door="queue_settle", body=RECEIPTS_BODY, responses=SETTLE_RESPONSES)
async def nack(request: web.Request) -> web.Response:
    return json_response(await request.app[FRONT_DOOR].queue_nack(call_context(request), request.match_info["name"],
                                                                  lambda: _read_body(request)))


@route("GET", QUEUE_PATH, "A queue's delivery state per partition", access="describe", front_door="queue_state",
       responses={"200": "OK", "404": "Unknown queue",
                  "409": "Not a queue, or the Idempotency-Key was used for other messages (idempotency_conflict)"})
async def describe(request: web.Request) -> web.Response:
    return json_response(await request.app[FRONT_DOOR].queue_state(call_context(request), request.match_info["name"]))
