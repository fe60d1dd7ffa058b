"""Produce and Fetch responses written by hand (decision 0404), the two answers on every record's
path; every other answer, and these in their rare shapes, goes through kio's generated classes
(``kafka_api.entities``).

Invariant: for the values it takes, ``encode_response`` writes exactly the bytes that
``entities.encode(entities.build(response_class(key, version), values))`` writes (a Hypothesis
test compares the two for every served version). Values it does not take make it answer None, and
the general path writes them: a field missing or of an unexpected type, a Produce record error or
log-append time, a Fetch partition naming its leader or another tagged field, an aborted
transaction, Fetch v16's ``node_endpoints``. The answer is a list of parts whose join is the
body, so a Fetch's records are copied once, into the frame.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

Parts = list[bytes | bytearray | memoryview]

PRODUCE_KEY: Final = 0
FETCH_KEY: Final = 1
PRODUCE_FLEXIBLE: Final = 9
FETCH_FLEXIBLE: Final = 12
FETCH_BY_ID: Final = 13
NO_TAGS: Final = b"\x00"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PRODUCE_PARTITION = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time (-1)
_FETCH_PARTITION = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable_offset
_ERROR_SESSION = struct.Struct(">hi")  # Fetch v7+: error_code, session_id
_FETCH_TAGGED: Final = ("diverging_epoch", "current_leader", "snapshot_id")
_NOT_TAKEN = (KeyError, TypeError, AttributeError, ValueError, struct.error)
_KNOWN_CODES: Final = frozenset(int(code) for code in ErrorCode)  # kio refuses any other


class _Declined(Exception):
    """Values the hand-written path leaves to the general one."""


def encode_response(api_key: int, version: int, values: Mapping[str, Any]) -> Parts | None:
    """The body of a Produce or Fetch response, as parts; None for any other API, and for values
    only the general path writes."""
    encoder = _ENCODERS.get(api_key)
    if encoder is None:
        return None
    parts: Parts = []
    try:
        encoder(parts, version, values)
    except (_Declined, *_NOT_TAKEN):
        return None
    return parts


def _produce(out: Parts, version: int, values: Mapping[str, Any]) -> None:
    flexible = version >= PRODUCE_FLEXIBLE
    responses = values["responses"]
    _array_length(out, len(responses), flexible)
    for topic in responses:
        _string(out, topic["name"], flexible)
        partitions = topic["partition_responses"]
        _array_length(out, len(partitions), flexible)
        for p in partitions:
            if p["log_append_time"] is not None:
                raise _Declined
            out.append(_PRODUCE_PARTITION.pack(p["index"], _code(p["error_code"]), p["base_offset"], -1))
            if version >= 5:
                out.append(_I64.pack(p["log_start_offset"]))
            if version >= 8:
                if p["record_errors"]:
                    raise _Declined
                _array_length(out, 0, flexible)
                _nullable_string(out, p["error_message"], flexible)
            if flexible:
                out.append(NO_TAGS)
        if flexible:
            out.append(NO_TAGS)
    out.append(_I32.pack(values["throttle_time"]))
    if flexible:
        out.append(NO_TAGS)


def _fetch(out: Parts, version: int, values: Mapping[str, Any]) -> None:
    flexible = version >= FETCH_FLEXIBLE
    out.append(_I32.pack(values["throttle_time"]))
    if version >= 7:
        out.append(_ERROR_SESSION.pack(_code(values["error_code"]), values["session_id"]))
    responses = values["responses"]
    _array_length(out, len(responses), flexible)
    for topic in responses:
        if version >= FETCH_BY_ID:
            topic_id = topic["topic_id"]
            if not isinstance(topic_id, uuid.UUID):
                raise _Declined
            out.append(topic_id.bytes)
        else:
            _string(out, topic["topic"], flexible)
        partitions = topic["partitions"]
        _array_length(out, len(partitions), flexible)
        for p in partitions:
            if flexible and any(p.get(name) is not None for name in _FETCH_TAGGED):
                raise _Declined
            out.append(_FETCH_PARTITION.pack(p["partition_index"], _code(p["error_code"]), p["high_watermark"],
                                             p["last_stable_offset"]))
            if version >= 5:
                out.append(_I64.pack(p["log_start_offset"]))
            aborted = p["aborted_transactions"]
            if aborted is None:
                out.append(NO_TAGS if flexible else _I32.pack(-1))  # a null array
            elif len(aborted):
                raise _Declined
            else:
                _array_length(out, 0, flexible)
            if version >= 11:
                out.append(_I32.pack(p["preferred_read_replica"]))
            _records(out, p["records"], flexible)
            if flexible:
                out.append(NO_TAGS)
        if flexible:
            out.append(NO_TAGS)
    if flexible:
        if version >= 16 and values.get("node_endpoints"):
            raise _Declined
        out.append(NO_TAGS)


_ENCODERS: Final[dict[int, Callable[[Parts, int, Mapping[str, Any]], None]]] = {
    PRODUCE_KEY: _produce, FETCH_KEY: _fetch}


def _code(value: int) -> int:
    if value not in _KNOWN_CODES:
        raise _Declined  # the general path refuses it as kio does
    return value


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _array_length(out: Parts, length: int, flexible: bool) -> None:
    out.append(_uvarint(length + 1) if flexible else _I32.pack(length))


def _string(out: Parts, value: str, flexible: bool) -> None:
    if not isinstance(value, str):
        raise _Declined
    encoded = value.encode()
    out.append(_uvarint(len(encoded) + 1) if flexible else _I16.pack(len(encoded)))
    out.append(encoded)


def _nullable_string(out: Parts, value: str | None, flexible: bool) -> None:
    if value is None:
        out.append(NO_TAGS if flexible else _I16.pack(-1))
    else:
        _string(out, value, flexible)


def _records(out: Parts, value: bytes | bytearray | memoryview | None, flexible: bool) -> None:
    if value is None:
        out.append(NO_TAGS if flexible else _I32.pack(-1))
        return
    if isinstance(value, memoryview):
        value = value.cast("B")  # one byte an item, so its len() is its size, as the frame counts it
    elif not isinstance(value, (bytes, bytearray)):
        raise _Declined
    size = len(value)
    out.append(_uvarint(size + 1) if flexible else _I32.pack(size))
    if size:
        out.append(value)

