"""Queues: send, receive with a visibility timeout, ack, nack (DESIGN §4), and the queue's state.

Receive, ack and nack also speak msgpack (``Content-Type``/``Accept: application/x-msgpack``, bytes
as bytes), which the Python client uses: no base64 and no JSON on the hot path."""

from __future__ import annotations

from typing import Any

import msgpack
from aiohttp import web

from http_api.auth import count_records, principal_of, recheck_access
from http_api.first_use import FIRST_USE_KIND
from http_api.json_codec import json_response
from http_api.keys import NODE
from http_api.params import JSON, MSGPACK, decode_msgpack, path_topic, read_json
from http_api.records import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY, PRODUCE_BODY
from http_api.routing import route
from http_api.user_limits import create_on_first_use, long_poll
from logbroker.errors import UnsupportedMediaTypeError
from logbroker.queues.requests import (
    NACK_DELAY_MS_MAX,
    RECEIPT,
    RECEIPTS_PER_REQUEST_MAX,
    parse_receipts,
    parse_receive,
)
from logbroker.records import parse_body

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
       quota="produce", body=PRODUCE_BODY,
       query=(("acks", "string", "0, 1 (default) or all"),), headers=(IDEMPOTENCY_HEADER,),
       responses={"200": "Offsets", "400": "Invalid", "403": "Not allowed, or past the queue owner's "
                  "storage_bytes_max (storage_quota_exceeded)", "404": "Unknown queue",
                  "409": "Not a queue, or the Idempotency-Key was used for other messages (idempotency_conflict)"})
async def send(request: web.Request) -> web.Response:
    node = request.app[NODE]
    name = path_topic(request)
    if FIRST_USE_KIND not in request:
        node.queues.get(name)
    if request.content_type == JSON:
        records = parse_body(await read_json(request), binary=False)
    elif request.content_type == MSGPACK:
        records = parse_body(decode_msgpack(await request.read()), binary=True)
    else:
        raise UnsupportedMediaTypeError(f"expected {JSON} or {MSGPACK}, got {request.content_type!r}")
    if FIRST_USE_KIND in request:
        await create_on_first_use(request)
        node.queues.get(name)
    offsets = await node.writes.produce_records(name, records, request.query.get("acks", "1"),
                                                request.headers.get(IDEMPOTENCY_KEY), writer=principal_of(request).name)
    count_records(request, len(offsets))
    return json_response({"offsets": offsets})


@route("POST", QUEUE_PATH + "/receive", "Receive messages, each leased for the visibility timeout "
       "(Accept: application/x-msgpack for a msgpack answer with bytes)", access="read", quota="fetch",
       body=RECEIVE_BODY, responses={"200": "messages with receipts", "400": "Invalid", "404": "Unknown queue",
                                     "409": "Not a queue"})
async def receive(request: web.Request) -> web.Response:
    node = request.app[NODE]
    name = path_topic(request)
    body = await _read_body(request) if request.body_exists else {}
    binary = MSGPACK in request.headers.get("Accept", "")
    parsed = parse_receive(body, node.config.fetch_wait_ms_max)
    with long_poll(request, parsed.wait_ms):
        messages = await node.queues.receive(name, parsed, binary=binary)
    if parsed.wait_ms:  # a long-poll: refused if access was revoked while it waited; what it leased
        await recheck_access(request)  # comes back when the visibility timeout runs out (decision 0175)
    count_records(request, len(messages))
    if binary:
        return web.Response(body=msgpack.packb({"messages": messages}, use_bin_type=True), content_type=MSGPACK)
    return json_response({"messages": messages})


async def _read_body(request: web.Request) -> Any:
    """A JSON or msgpack body (receive, ack and nack take either)."""
    if request.content_type == MSGPACK:
        return decode_msgpack(await request.read())
    return await read_json(request)


@route("POST", QUEUE_PATH + "/ack", "Acknowledge messages by receipt", access="read", body=RECEIPTS_BODY,
       responses=SETTLE_RESPONSES)
async def ack(request: web.Request) -> web.Response:
    node = request.app[NODE]
    name = path_topic(request)
    receipts, _ = parse_receipts(await _read_body(request), nack=False)
    return json_response(await node.queues.ack(name, receipts))


@route("POST", QUEUE_PATH + "/nack", "Give messages back (redelivered after delay_ms)", access="read",
       body=RECEIPTS_BODY,
       responses=SETTLE_RESPONSES)
async def nack(request: web.Request) -> web.Response:
    node = request.app[NODE]
    name = path_topic(request)
    receipts, delay_ms = parse_receipts(await _read_body(request), nack=True)
    return json_response(await node.queues.nack(name, receipts, delay_ms))


@route("GET", QUEUE_PATH, "A queue's delivery state per partition", access="describe",
       responses={"200": "OK", "404": "Unknown queue",
                  "409": "Not a queue, or the Idempotency-Key was used for other messages (idempotency_conflict)"})
async def describe(request: web.Request) -> web.Response:
    return json_response(request.app[NODE].queues.describe(path_topic(request)))
