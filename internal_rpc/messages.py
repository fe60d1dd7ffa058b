"""The node service's messages (``logbroker.Node``): one request and one answer type per method,
and ``METHODS``, the one table the server decodes requests by and callers encode and decode by.

Every message is a frozen msgspec struct that refuses unknown fields and carries ``v``, the
protocol version (``VERSION``). The rule for a version: a change a receiver must understand (a new
field, a field that changes meaning, a new answer code) is a new version; a message of a version
this node does not speak is refused as ``invalid_request`` naming both versions, and so is a body
of the wrong shape (a missing field, a wrong type, a value out of bounds). Refusals are answered
errors: the handler never runs, nothing changes, the connection serves on.

Bytes fields stay ``bytes``: a batch is copied out of the frame once when it is decoded, as before
(``msgspec.convert`` keeps the same object), and once into the frame when it is encoded.

Replication answers carry codes from a closed set (``ReplicationCode``), each a LogBroker error
code of ``logbroker.error_codes``, never free text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec

from internal_rpc.errors import RpcError

VERSION: Final = 2  # 2: a shipment entry's ``sync`` is ``align`` (decision 0370)
PARTITIONS_PER_CALL_MAX: Final = 1024
FETCH_BYTES_MAX: Final = 16 * 1024 * 1024
ENTRIES_MAX: Final = 4096  # partitions in one shipment
EPOCHS_MAX: Final = 100_000  # leader-epoch entries in one align entry

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Acks = Literal["0", "1", "all"]
# Why a follower did not apply a shipment entry, by the LogBroker error code that says it:
# ``stale_leader_epoch`` — the entry's epoch is older than one this node knows (``epoch`` names it);
# ``unknown_partition`` — this node does not host that partition (of that topic id) now;
# ``non_sequential_append`` — the entry does not start at the follower's log end, or its batches do
# not continue it (``log_end`` names the follower's end; the leader aligns it);
# ``storage_error`` — the follower's disk refused it.
ReplicationCode = Literal["stale_leader_epoch", "unknown_partition", "non_sequential_append", "storage_error"]
REPLICATION_CODES: Final[tuple[ReplicationCode, ...]] = (
    "stale_leader_epoch", "unknown_partition", "non_sequential_append", "storage_error")


class MessageError(RpcError):
    """A body that is not a message of its method: its shape, its bounds or its version."""

    code = "invalid_request"


class Message(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    v: int = VERSION


class Answer(Message, frozen=True):
    pass


A = TypeVar("A", bound=Answer)


class Request(Message, Generic[A], frozen=True):
    """A request whose answer is an ``A`` (so a caller's answer is typed by its request)."""


class Part(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A struct nested in a message (versioned by the message that holds it)."""


# ---- Ping -------------------------------------------------------------------------------------

class PingAnswer(Answer, frozen=True):
    node_id: int


class PingRequest(Request[PingAnswer], frozen=True):
    pass


# ---- forwarded produce, fetch and offsets (served by the partition's leader) ------------------

class ProduceAnswer(Answer, frozen=True):
    base_offset: int


class ProduceRequest(Request[ProduceAnswer], frozen=True):
    topic: str
    partition: NonNegative
    batch: bytes
    acks: Acks
    topic_id: str | None = None


class FetchAnswer(Answer, frozen=True):
    data: bytes
    first_offset: int
    next_offset: int
    high_watermark: int


class FetchRequest(Request[FetchAnswer], frozen=True):
    topic: str
    partition: NonNegative
    offset: NonNegative
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=FETCH_BYTES_MAX)]
    wait_ms: NonNegative = 0
    replica: bool = False  # served from an in-sync copy (the leader could not be reached)
    topic_id: str | None = None


class ListOffsetAnswer(Answer, frozen=True):
    partition: int
    offset: int | None


class ListOffsetRequest(Request[ListOffsetAnswer], frozen=True):
    topic: str
    partition: NonNegative
    at: str  # earliest, latest or a timestamp in ms


class PartitionFiguresAnswer(Answer, frozen=True):
    figures: dict[int, dict[str, int | float]]


class PartitionFiguresRequest(Request[PartitionFiguresAnswer], frozen=True):
    topic: str
    partitions: Annotated[list[NonNegative], msgspec.Meta(max_length=PARTITIONS_PER_CALL_MAX)]


# ---- partition moves -------------------------------------------------------------------------

class FreezeAnswer(Answer, frozen=True):
    log_end: int


class FreezeRequest(Request[FreezeAnswer], frozen=True):
    topic: str
    partition: NonNegative
    ttl_s: float


class ThawAnswer(Answer, frozen=True):
    pass


class ThawRequest(Request[ThawAnswer], frozen=True):
    topic: str
    partition: NonNegative


# ---- replication (DESIGN §6) -----------------------------------------------------------------

class ShipmentEntry(Part, frozen=True):
    """One partition of a shipment: an ``align`` (the leader's epoch history and log bounds) or
    whole batches starting at ``start``, with the leader's epoch and high watermark."""

    topic: str
    topic_id: str
    partition: NonNegative
    epoch: NonNegative
    high_watermark: NonNegative = msgspec.field(name="hw")
    leader_end: NonNegative
    leader_start: NonNegative
    start: NonNegative = 0
    align: bool = False
    data: bytes = b""
    leader_epochs: Annotated[tuple[tuple[NonNegative, NonNegative], ...], msgspec.Meta(max_length=EPOCHS_MAX)] = ()


class ShipmentResult(Part, frozen=True):
    """A follower's answer to one entry: its log end, or the code of why it did not apply it."""

    log_end: int | None = None
    error: ReplicationCode | None = None
    epoch: int | None = None  # with stale_leader_epoch: the newest epoch the follower knows


class ReplicateAnswer(Answer, frozen=True):
    results: list[ShipmentResult]  # one per entry, in request order


class ReplicateRequest(Request[ReplicateAnswer], frozen=True):
    entries: Annotated[list[ShipmentEntry], msgspec.Meta(max_length=ENTRIES_MAX)]


# ---- the storage quota's sums ----------------------------------------------------------------

class StorageByPayerAnswer(Answer, frozen=True):
    payers: dict[str, int]  # bytes stored per payer in the partitions the answering node leads


class StorageByPayerRequest(Request[StorageByPayerAnswer], frozen=True):
    pass


# ---- the table -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class Method:
    name: str
    request: type[Request[Any]]
    answer: type[Answer]


METHODS: Final[dict[str, Method]] = {m.name: m for m in (
    Method("Ping", PingRequest, PingAnswer),
    Method("Produce", ProduceRequest, ProduceAnswer),
    Method("Fetch", FetchRequest, FetchAnswer),
    Method("ListOffset", ListOffsetRequest, ListOffsetAnswer),
    Method("PartitionFigures", PartitionFiguresRequest, PartitionFiguresAnswer),
    Method("Freeze", FreezeRequest, FreezeAnswer),
    Method("Thaw", ThawRequest, ThawAnswer),
    Method("Replicate", ReplicateRequest, ReplicateAnswer),
    Method("StorageByPayer", StorageByPayerRequest, StorageByPayerAnswer),
)}
_BY_REQUEST: Final = {m.request: m for m in METHODS.values()}
assert len(_BY_REQUEST) == len(METHODS)

M = TypeVar("M", bound=Message)
Handler = Callable[[Any], Awaitable[Answer]]
RawMethod = Callable[[Any], Awaitable[Answer]]


def method_of(request: Request[Any]) -> Method:
    """The table's row for ``request``'s type."""
    return _BY_REQUEST[type(request)]


def decode(kind: type[M], body: object) -> M:
    """``body`` (a frame's decoded map) as a ``kind``; ``MessageError`` when it is not one."""
    if not isinstance(body, dict):
        raise MessageError(f"a {kind.__name__} must be a map")
    version = body.get("v")
    if version != VERSION or isinstance(version, bool):
        raise MessageError(f"protocol version {version!r} of {kind.__name__} is not spoken here "
                           f"(this node speaks {VERSION})")
    try:
        return msgspec.convert(body, kind)
    except msgspec.ValidationError as exc:
        raise MessageError(f"{kind.__name__}: {exc}") from None


def bind(handlers: Mapping[str, Handler]) -> dict[str, RawMethod]:
    """The server's methods: each decodes its body into the table's request type (a malformed one
    is ``MessageError`` before the handler runs) and hands back the handler's typed answer.
    ``handlers`` names every method of the table, and only those."""
    assert set(handlers) == set(METHODS), set(handlers) ^ set(METHODS)

    def typed(method: Method, handler: Handler) -> RawMethod:
        async def run(body: object) -> Answer:
            answer = await handler(decode(method.request, body))
            assert isinstance(answer, method.answer), (method.name, answer)
            return answer

        return run

    return {name: typed(METHODS[name], handler) for name, handler in handlers.items()}
