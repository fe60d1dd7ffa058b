"""Produce, fetch (JSON or raw batches with long-poll) and list offsets: each read from HTTP and
handed to the broker's front door (``logbroker.api``), which authorizes, checks ``acks`` and the
quota, calls the node and charges; these handlers parse the request and render the answer."""

from __future__ import annotations

import random

from aiohttp import web

from http_api.auth import call_context, principal_of, recheck_access
from http_api.bodies import read_body
from http_api.decoding import DECODER
from http_api.json_codec import encode, json_response
from http_api.keys import FRONT_DOOR, NODE, SENDFILE
from http_api.params import (
    BATCH,
    ENCODING_QUERY,
    JSON,
    MSGPACK,
    RACK_QUERY,
    decode_msgpack,
    path_partition,
    path_topic,
    query_base64,
    query_int,
    query_rack,
    read_json,
)
from http_api.routing import route
from http_api.sendfile import send_slice
from logbroker.api_types import Answered, Prebuilt
from logbroker.batch_limits import CheckedBatch, check_batch, is_costly, is_costly_read
from logbroker.errors import UnsupportedMediaTypeError
from logbroker.producer_ids import issue
from logbroker.records import (
    HEADERS_PER_RECORD_MAX,
    RECORDS_PER_REQUEST_MAX,
    IncomingRecord,
    Skipped,
    parse_body,
    render_records,
    take_records,
)
from logbroker.unreadable import report_skipped
from segments.log import LogRead, LogSlice

RECORD_PATH = "/v1/topics/{name}/partitions/{partition}"
FETCH_BYTES_DEFAULT = 1024 * 1024
FETCH_RECORDS_DEFAULT = 10_000
NEXT_OFFSET = "X-LogBroker-Next-Offset"
HIGH_WATERMARK = "X-LogBroker-High-Watermark"
# On a partition-scoped answer served by forwarding: the leader's id (the client reads metadata again).
LEADER = "X-LogBroker-Leader"
# Stored once within the topic's dedup_window_ms (DESIGN §4); a prebuilt batch uses its producer id.
IDEMPOTENCY_KEY = "Idempotency-Key"
IDEMPOTENCY_HEADER = (IDEMPOTENCY_KEY, "string", "stores the write once within the topic's dedup_window_ms; a key "
                                                 "belongs to the caller (a retry with it answers the first offsets)")
_PRODUCER_RNG = random.SystemRandom()
PRODUCE_BODY = {"type": "object", "required": ["records"], "additionalProperties": False, "properties": {"records": {
    "type": "array", "minItems": 1, "maxItems": RECORDS_PER_REQUEST_MAX, "items": {
        "type": "object", "additionalProperties": False, "properties": {
            "key": {"type": "string"}, "key_b64": {"type": "string", "format": "byte"}, "value": {"type": "string"},
            "value_b64": {"type": "string", "format": "byte"}, "partition": {"type": "integer", "minimum": 0},
            "timestamp": {"type": "integer"},
            "headers": {"type": "array", "maxItems": HEADERS_PER_RECORD_MAX, "items": {"type": "object"}}}}}}}


@route("POST", "/v1/topics/{name}/records", "Produce records (JSON, msgpack or one prebuilt batch)",
       access="write", quota="produce", front_door="publish",
       query=(("acks", "string", "0, 1 (default) or all"),
              ("partition", "integer", "required with application/vnd.logbroker.batch")),
       headers=(IDEMPOTENCY_HEADER,),
       body=PRODUCE_BODY, responses={"200": "Offsets", "400": "Invalid", "403": "Not allowed, or past the topic "
                                     "owner's storage_bytes_max (storage_quota_exceeded)", "404": "Unknown topic",
                                     "409": "The Idempotency-Key or producer sequence was used for other records "
                                     "(idempotency_conflict)", "413": "Too large", "415": "Unsupported content type"})
async def produce(request: web.Request) -> web.Response:
    node = request.app[NODE]
    body = _Body(request)
    published = await request.app[FRONT_DOOR].publish(call_context(request), request.match_info["name"], body,
                                              request.query.get("acks", "1"),
                                              idempotency_key=request.headers.get(IDEMPOTENCY_KEY))
    if body.partition is not None:
        leader = node.reads.leader_elsewhere(path_topic(request), body.partition)
        if leader is not None:
            return json_response({"offsets": published.offsets}, headers={LEADER: str(leader)})
    return json_response({"offsets": published.offsets})


class _Body:
    """A produce request's body for the front door (``logbroker.api_types.Payload``): JSON or msgpack
    records, or one prebuilt batch for the ``partition`` query parameter, read when decoded."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.partition: int | None = None  # a prebuilt batch's

    def received_bytes(self) -> int:
        return self.request.content.total_bytes

    async def decode(self) -> list[IncomingRecord] | Prebuilt:
        request, content_type = self.request, self.request.content_type
        if request.body_exists:  # within body_timeout_ms, as every other body (``http_api.bodies``)
            await read_body(request)
        if content_type == BATCH:
            partition = query_int(request, "partition")
            data = await request.read()
            checked = await checked_batch(request, data)
            self.partition = partition
            return Prebuilt(partition, data, checked)
        if content_type == JSON:
            return parse_body(await read_json(request), binary=False)
        if content_type == MSGPACK:
            return parse_body(decode_msgpack(await request.read()), binary=True)
        raise UnsupportedMediaTypeError(f"expected {JSON}, {MSGPACK} or {BATCH}, got {content_type!r}")


@route("POST", "/v1/producers", "A producer identity for idempotent prebuilt batches (Kafka's InitProducerId): "
       "an id bound to the caller and an epoch; the producer numbers each partition's records from 0",
       access="user", responses={"200": "{producer_id, producer_epoch}"})
async def init_producer(request: web.Request) -> web.Response:
    issued = issue(principal_of(request).name, _PRODUCER_RNG)
    return json_response({"producer_id": issued.producer_id, "producer_epoch": issued.producer_epoch})


async def checked_batch(request: web.Request, batch: bytes) -> CheckedBatch:
    """Hold a prebuilt batch to ``check_batch`` (bounds, and every record row as readers decode
    it): in the decode pool when it is compressed (decompressing is the cost) or large (decoding
    its rows), on the loop otherwise."""
    if is_costly(batch):
        checked: CheckedBatch = await request.app[DECODER].run(check_batch, batch)
        return checked
    return check_batch(batch)


@route("GET", RECORD_PATH + "/records", "Fetch records from an offset (long-poll with wait_ms)",
       access="read", quota="fetch", front_door="fetch",
       query=(("offset", "integer", "first offset to read"),
              ("max_records", "integer", "JSON only"), ("max_bytes", "integer", "default 1 MiB"),
              ("wait_ms", "integer", "wait this long for data at the end of the log"),
              ENCODING_QUERY,
              RACK_QUERY), required=("offset",),
       responses={"200": "Records (JSON: records, next_offset, high_watermark, and skipped: stored batches whose "
                         "records cannot be decoded, passed over) or raw batches (Accept: "
                         "application/vnd.logbroker.batch)",
                  "404": "Unknown topic or partition", "416": "Offset out of range"})
async def fetch(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE]
    topic, partition = path_topic(request), path_partition(request)
    offset = query_int(request, "offset")
    max_bytes = query_int(request, "max_bytes", default=FETCH_BYTES_DEFAULT, low=1)
    wait_ms = query_int(request, "wait_ms", default=0)
    force_base64 = query_base64(request)
    rack = query_rack(request)
    front_door, ctx = request.app[FRONT_DOOR], call_context(request)
    if BATCH in request.headers.get("Accept", ""):
        async def raw_answer(read: tuple[LogSlice | LogRead | None, int]) -> Answered[web.StreamResponse]:
            piece, hwm = read
            if wait_ms:  # a long-poll: access may have been revoked while it waited (decision 0175)
                await recheck_access(request)
            headers = {HIGH_WATERMARK: str(hwm), NEXT_OFFSET: str(offset if piece is None else piece.next_offset)}
            records = 0 if piece is None else max(0, piece.next_offset - offset)
            leader = node.reads.leader_elsewhere(topic, partition)
            if leader is not None:
                headers[LEADER] = str(leader)
            if piece is None:
                response: web.StreamResponse = web.Response(body=b"", content_type=BATCH, headers=headers)
            elif isinstance(piece, LogRead):  # forwarded: the leader's bytes, already in memory
                response = web.Response(body=piece.data, content_type=BATCH, headers=headers)
            else:
                response = web.StreamResponse(headers=headers)
                response.content_type = BATCH
                response = await send_slice(request, response, piece, request.app[SENDFILE])
            return Answered(response, response.content_length or 0, records)
        return await front_door.fetch_raw(ctx, topic, partition, offset, max_bytes=max_bytes, wait_ms=wait_ms,
                                          rack=rack, answer=raw_answer)
    max_records = query_int(request, "max_records", default=FETCH_RECORDS_DEFAULT, low=1,
                            high=node.config.fetch_records_max)

    async def json_answer(read: tuple[LogRead, int]) -> Answered[web.StreamResponse]:
        result, hwm = read
        if wait_ms:
            await recheck_access(request)
        body, skipped, records = await request.app[DECODER].run(
            _json_answer, result, offset, max_records, force_base64, hwm, inline=not is_costly_read(result.data))
        if skipped:
            report_skipped(node.metrics.count_skipped, topic, partition, skipped, "fetch")
        response = web.Response(body=body, content_type=JSON, charset="utf-8")
        return Answered(response, response.content_length or 0, records)
    return await front_door.fetch(ctx, topic, partition, offset, max_bytes=max_bytes, wait_ms=wait_ms, rack=rack,
                                  answer=json_answer)


def _json_answer(result: LogRead, offset: int, max_records: int, force_base64: bool,
                 hwm: int) -> tuple[bytes, list[Skipped], int]:
    """The JSON fetch answer and what it skipped (run in the decode pool unless the read is small:
    decoding and rendering are the costly part). ``skipped`` lists the stored batches whose records cannot be decoded
    that the answer passed over (decision 0220); ``next_offset`` is past them. Also the number of
    records it holds."""
    records, stopped_at, skipped = take_records(result.data, offset, max_records)
    return encode({"records": render_records(records, force_base64=force_base64),
                   "next_offset": result.next_offset if stopped_at is None else stopped_at,
                   "high_watermark": hwm, "skipped": [s.to_json() for s in skipped]}), skipped, len(records)


@route("GET", RECORD_PATH + "/offsets", "The earliest, latest or first offset at a timestamp", access="read",
       front_door="list_offsets", query=(("at", "string", "earliest, latest (default) or a timestamp in ms"),))
async def list_offsets(request: web.Request) -> web.Response:
    at = request.query.get("at", "latest")
    return json_response(await request.app[FRONT_DOOR].list_offsets(
        call_context(request), path_topic(request), path_partition(request), at))
