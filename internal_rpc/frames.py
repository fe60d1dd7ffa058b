"""The wire format of the internal RPC: length-prefixed msgpack maps over one TCP (TLS)
connection per pair of nodes, many calls in flight on it, answered by id in any order.

| frame part | size    | meaning                                                |
|------------|---------|--------------------------------------------------------|
| length     | 4 bytes | big-endian length of the body, at most MESSAGE_BYTES_MAX |
| body       | length  | one msgpack map (bin type on, string keys)             |

Bodies, by who sends them:

| sender | keys | meaning |
|---|---|---|
| client, first | ``hello``, ``token`` | the cluster token; nothing else is read before it |
| server | ``hello`` | accepted (or ``e`` = ``unauthenticated``, then the server closes) |
| client | ``i`` id, ``m`` "Service/Method", ``t`` deadline ms, ``b`` request, ``s`` stream id (optional) | a call |
| client | ``k`` stream id | cancel what that stream has in flight (the client gave up on it) |
| server | ``i``, ``b`` answer | the call's answer |
| server | ``i``, ``e`` code, ``d`` detail, ``r`` retriable, ``x`` extra JSON, ``a`` answered | its error |

A request and its answer (``b``) are messages of ``internal_rpc.messages``.

Calls of one stream are handled one after another, in the order they were sent; other calls run
concurrently. A malformed frame ends the connection (the peer is not one of ours); a malformed
body (``b``) is the method's business: it is answered ``invalid_request``. Frames are written and
read with msgspec, so a typed message (a msgspec struct) is packed as the map it stands for, with
no copy into a dict first.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import msgspec

MESSAGE_BYTES_MAX: Final = 64 * 1024 * 1024
HEADER: Final = struct.Struct(">I")
assert HEADER.size == 4


class FrameError(ValueError):
    """A frame that is not ours: too long, or not a msgpack map."""


_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder()


def pack(message: dict[str, Any]) -> bytes:
    return _ENCODER.encode(message)


def unpack(data: bytes) -> dict[str, Any]:
    try:
        message = _DECODER.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError) as exc:  # ValueError: a string not UTF-8
        raise FrameError(f"not a msgpack map: {exc}") from exc
    if not isinstance(message, dict):
        raise FrameError("an RPC message must be a map")
    return message


def encode(message: dict[str, Any]) -> tuple[bytes, bytes]:
    """The frame's header and body (written together, so frames never interleave)."""
    body = pack(message)
    if len(body) > MESSAGE_BYTES_MAX:
        raise FrameError(f"a message of {len(body)} bytes is over the {MESSAGE_BYTES_MAX}-byte limit")
    return HEADER.pack(len(body)), body


def body_length(header: bytes) -> int:
    """The body length a header announces; ``FrameError`` past the limit."""
    (length,) = HEADER.unpack(header)
    if length > MESSAGE_BYTES_MAX:
        raise FrameError(f"a frame of {length} bytes is over the {MESSAGE_BYTES_MAX}-byte limit")
    return int(length)
