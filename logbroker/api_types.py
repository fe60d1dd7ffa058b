"""The front door's vocabulary, shared by ``BrokerApi`` (one-shot calls), ``StreamDoor`` (long-lived
calls) and the protocols that call them: who calls (``CallContext``), what a write carries
(``Payload``, ``Prebuilt``), what a read answers (``Answered``), the ``acks`` values and the one
check of them, and what each operation is authorized for and charged to. Pure data: no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Final, Generic, Literal, Protocol, TypeVar

from logbroker.auth.groups import GroupAction
from logbroker.auth.permissions import Action, Principal
from logbroker.auth.quotas import QuotaKind, QuotaLimits
from logbroker.batch_limits import CheckedBatch
from logbroker.errors import InvalidRequestError
from logbroker.records import IncomingRecord

T = TypeVar("T")
Acks = Literal["0", "1", "all"]
ACKS: Final[tuple[Acks, ...]] = ("0", "1", "all")
ACKS_SHOWN_MAX: Final = 20  # characters of a refused acks value quoted back
TopicOperation = Literal["publish", "fetch", "list_offsets", "queue_send", "queue_receive", "queue_settle",
                         "queue_state"]
GroupOperation = Literal["group_join", "group_heartbeat", "group_leave", "group_commit"]
Operation = TopicOperation | GroupOperation
# What each operation needs: the topic action it is authorized for and the quota it is charged to.
# The HTTP route table checks the access its front-door routes declare against this.
OPERATIONS: Final[dict[TopicOperation, tuple[Action, QuotaKind | None]]] = {
    "publish": ("write", "produce"), "fetch": ("read", "fetch"), "list_offsets": ("read", None),
    "queue_send": ("write", "produce"), "queue_receive": ("read", "fetch"), "queue_settle": ("read", None),
    "queue_state": ("describe", None)}
# The group action each group operation is authorized for (none is charged to a quota).
GROUP_OPERATIONS: Final[dict[GroupOperation, GroupAction]] = {
    "group_join": "read", "group_heartbeat": "read", "group_leave": "read", "group_commit": "read"}


def declared_access(operation: Operation) -> tuple[str, QuotaKind | None]:
    """The access level and quota a route calling ``operation`` declares (``http_api.routing``):
    a topic action and its quota, or ``group_<action>`` and none."""
    if operation in GROUP_OPERATIONS:
        return f"group_{GROUP_OPERATIONS[operation]}", None
    return OPERATIONS[operation]  # type: ignore[index]
Body = Callable[[], Awaitable[object]]  # a request body as its protocol reads and decodes it (JSON, msgpack)


def check_acks(acks: str) -> Acks:
    """``acks`` as one of ``ACKS``, else ``InvalidRequestError`` (400 / INVALID_ARGUMENT)."""
    for allowed in ACKS:
        if acks == allowed:
            return allowed
    raise InvalidRequestError(f"acks must be 0, 1 or all, not {acks[:ACKS_SHOWN_MAX]!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class CallContext:
    """Who calls, within which limits, and until when (``time.monotonic()`` seconds; None: no
    deadline). Built by a protocol once it has authenticated the caller."""

    principal: Principal
    limits: QuotaLimits
    deadline: float | None = None

    def wait_ms(self, wanted_ms: int, now: float) -> int:
        """``wanted_ms`` cut to what is left before the deadline (never below 0)."""
        if self.deadline is None:
            return wanted_ms
        return max(0, min(wanted_ms, int((self.deadline - now) * 1000)))


@dataclasses.dataclass(frozen=True, slots=True)
class Prebuilt:
    """A batch the client built, for one partition, checked by ``batch_limits.check_batch``."""

    partition: int
    batch: bytes
    checked: CheckedBatch


class Payload(Protocol):
    """The body of a write as its protocol received it."""

    def received_bytes(self) -> int:
        """The bytes received so far (what the write is charged, stored or refused)."""

    async def decode(self) -> list[IncomingRecord] | Prebuilt:
        """The records, or one prebuilt batch; a typed error when the body is not valid."""


class QueuePayload(Protocol):
    """The body of a queue send as its protocol receives it: received whole first (a protocol
    whose message is already read does nothing), then decoded into records."""

    def received_bytes(self) -> int:
        """The bytes received so far (what the send is charged, stored or refused)."""

    async def receive(self) -> None:
        """The whole body, within the protocol's bounds (a typed error when too large or too slow)."""

    async def decode(self) -> list[IncomingRecord]:
        """The records; a typed error when the body is not valid."""


@dataclasses.dataclass(frozen=True, slots=True)
class Published:
    offsets: list[dict[str, int]]
    records: int


@dataclasses.dataclass(frozen=True, slots=True)
class Answered(Generic[T]):
    """A read rendered by its protocol: its answer, the bytes it sends and the records it holds."""

    value: T
    size_bytes: int
    records: int
