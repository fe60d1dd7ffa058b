"""Reading request input: bounded integers from the query string and bodies by content type.
Every failure is a typed error (400 / 415 / 413), never an exception from a parser.

Text is checked here, at the boundary, once: JSON bodies must be UTF-8 and hold no lone surrogate
(a string with one cannot be encoded again, so it would fail deep inside a handler), and integers
in paths, queries and headers are ASCII digits only (``str.isdigit`` and ``int`` also take other
scripts' digits, and superscript one, U+00B9, passes the first but not the second)."""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgpack
from aiohttp import web

from coordinator.models import validate_name, validate_rack
from http_api import json_codec
from http_api.json_codec import JSON as JSON
from logbroker.errors import InvalidRequestError, UnsupportedMediaTypeError

MSGPACK: Final = "application/x-msgpack"
BATCH: Final = "application/vnd.logbroker.batch"
INT64_MAX: Final = 2**63 - 1
ASCII_INT: Final = re.compile(r"-?[0-9]{1,19}", re.ASCII)
PARTITION_DIGITS_MAX: Final = 9
# Where a JSON text can hold a surrogate at all: ``\uD800``-``\uDFFF`` escapes (raw surrogates are
# not UTF-8, so the strict decode refuses them first).
SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]", re.ASCII)
# The ``rack`` and ``encoding`` queries of every read (fetch and both push streams), as the OpenAPI
# lists them.
RACK_QUERY: Final = ("rack", "string", "the reader's rack: served by an in-sync replica there when there is one, "
                                       "never past that replica's high watermark, else by the leader")
ENCODING_QUERY: Final = ("encoding", "string", "base64: every key/value/header value as base64")


def query_rack(request: web.Request) -> str | None:
    """The reader's ``rack`` (None without one; 400 when it is not a rack's name)."""
    return validate_rack(request.query.get("rack"))


def query_base64(request: web.Request) -> bool:
    """``encoding=base64`` (every byte field as base64) or ``utf8`` (the default: text where it
    decodes, else base64)."""
    encoding = request.query.get("encoding", "utf8")
    if encoding not in ("utf8", "base64"):
        raise InvalidRequestError("encoding must be utf8 or base64")
    return encoding == "base64"


def query_flag(request: web.Request, name: str, *, default: bool) -> bool:
    """A ``true``/``false`` query parameter (400 for anything else)."""
    raw = request.query.get(name)
    if raw is None:
        return default
    if raw not in ("true", "false"):
        raise InvalidRequestError(f"{name} must be true or false")
    return raw == "true"


def query_int(request: web.Request, name: str, *, default: int | None = None, low: int = 0,
              high: int = INT64_MAX) -> int:
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise InvalidRequestError(f"query parameter {name} is required")
        return default
    return ascii_int(raw, f"query parameter {name}", low, high)


def ascii_int(raw: str, what: str, low: int, high: int) -> int:
    """``raw`` as an integer in ``[low, high]`` if it is an optional ``-`` and ASCII digits."""
    if not ASCII_INT.fullmatch(raw):
        raise InvalidRequestError(f"{what} must be an integer of ASCII digits, not {raw[:40]!r}")
    value = int(raw)
    if not low <= value <= high:
        raise InvalidRequestError(f"{what} must be in [{low}, {high}], not {value}")
    return value


def path_topic(request: web.Request) -> str:
    """The ``{name}`` path segment, checked like a topic name (so path tricks are a 400)."""
    return validate_name(request.match_info["name"], internal=True)


def path_partition(request: web.Request) -> int:
    raw = request.match_info["partition"]
    if len(raw) > PARTITION_DIGITS_MAX or raw.startswith("-"):
        raise InvalidRequestError(f"partition must be a non-negative integer, not {raw[:40]!r}")
    return ascii_int(raw, "partition", 0, 10**PARTITION_DIGITS_MAX - 1)


async def read_json(request: web.Request) -> Any:
    if request.content_type != JSON:
        raise UnsupportedMediaTypeError(f"expected {JSON}, got {request.content_type!r}")
    return load_json(await request.read())


def load_json(raw: bytes) -> Any:
    """Decode a JSON body: UTF-8 (a BOM is skipped), and no string or key with a lone surrogate."""
    try:
        return json_codec.decode(raw)
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(f"the body is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    except ValueError as exc:
        text = raw.decode("utf-8-sig", errors="replace")
        if SURROGATE_ESCAPE.search(text) and _lone_surrogate(text):
            raise InvalidRequestError("the body holds a lone UTF-16 surrogate (\\ud800-\\udfff escaped alone), "
                                      "which is not text") from exc
        raise InvalidRequestError(f"the body is not valid JSON: {exc}") from exc


def _lone_surrogate(text: str) -> bool:
    """Whether ``text``, otherwise valid JSON, fails only for a lone surrogate (the decoder's own
    message for one is about truncated input)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return not _encodable(value)


def _encodable(value: Any) -> bool:
    """Whether every string and key of a decoded JSON value is valid Unicode. Escaped pairs were
    joined by the decoder, so only lone surrogates fail (the encoder runs in C)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):
        return False
    return True


def decode_msgpack(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, TypeError) as exc:
        raise InvalidRequestError(f"the body is not valid msgpack: {exc}") from exc
