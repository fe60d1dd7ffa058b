"""Reading request input: bounded integers from the query string and bodies by content type.
Every failure is a typed error (400 / 415 / 413), never an exception from a parser."""

from __future__ import annotations

import json
from typing import Any, Final

import msgpack
from aiohttp import web

from coordinator.models import validate_name
from logbroker.errors import InvalidRequestError, UnsupportedMediaTypeError

JSON: Final = "application/json"
MSGPACK: Final = "application/x-msgpack"
BATCH: Final = "application/vnd.logbroker.batch"
INT64_MAX: Final = 2**63 - 1


def query_int(request: web.Request, name: str, *, default: int | None = None, low: int = 0,
              high: int = INT64_MAX) -> int:
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise InvalidRequestError(f"query parameter {name} is required")
        return default
    try:
        value = int(raw, 10)
    except ValueError as exc:
        raise InvalidRequestError(f"query parameter {name} must be an integer, not {raw!r}") from exc
    if not low <= value <= high:
        raise InvalidRequestError(f"query parameter {name} must be in [{low}, {high}], not {value}")
    return value


def path_topic(request: web.Request) -> str:
    """The ``{name}`` path segment, checked like a topic name (so path tricks are a 400)."""
    return validate_name(request.match_info["name"], internal=True)


def path_partition(request: web.Request) -> int:
    raw = request.match_info["partition"]
    if not raw.isdigit() or len(raw) > 9:
        raise InvalidRequestError(f"partition must be a non-negative integer, not {raw!r}")
    return int(raw)


async def read_json(request: web.Request) -> Any:
    if request.content_type != JSON:
        raise UnsupportedMediaTypeError(f"expected {JSON}, got {request.content_type!r}")
    raw = await request.read()
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequestError(f"the body is not valid JSON: {exc}") from exc


def decode_msgpack(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, TypeError) as exc:
        raise InvalidRequestError(f"the body is not valid msgpack: {exc}") from exc
