"""Queue request bodies and receipts (pure). A receipt is ``<partition>.<offset>.<token hex>``:
it names the message and the lease it was delivered under, so a receipt of an expired lease that
was delivered again, or one made up, matches no lease."""

from __future__ import annotations

import dataclasses
import re
from typing import Final, NamedTuple

from logbroker.errors import InvalidRequestError
from logbroker.request_fields import bounded_int as _int
from logbroker.request_fields import json_object as _object

RECEIVE_MESSAGES_MAX: Final = 1000
RECEIVE_MESSAGES_DEFAULT: Final = 10
VISIBILITY_MS_MIN: Final = 10
VISIBILITY_MS_MAX: Final = 12 * 3600 * 1000
NACK_DELAY_MS_MAX: Final = 12 * 3600 * 1000
RECEIPTS_PER_REQUEST_MAX: Final = 10_000
RECEIPT: Final = re.compile(r"([0-9]{1,9})\.([0-9]{1,19})\.([0-9a-f]{1,16})", re.ASCII)


class Receipt(NamedTuple):
    partition: int
    offset: int
    token: int

    def __str__(self) -> str:
        return f"{self.partition}.{self.offset}.{self.token:x}"


@dataclasses.dataclass(frozen=True, slots=True)
class ReceiveRequest:
    max_messages: int
    visibility_timeout_ms: int | None
    wait_ms: int




def parse_receipt(raw: object) -> Receipt:
    match = RECEIPT.fullmatch(raw) if isinstance(raw, str) else None
    if match is None:
        raise InvalidRequestError(f"not a receipt: {str(raw)[:80]!r}")
    partition, offset, token = match.groups()
    if token.strip("0") == "":
        raise InvalidRequestError(f"not a receipt: {str(raw)[:80]!r}")
    return Receipt(int(partition), int(offset), int(token, 16))


def parse_receive(body: object, wait_ms_max: int) -> ReceiveRequest:
    raw = _object(body, {"max_messages", "visibility_timeout_ms", "wait_ms"}, set())
    visibility = raw.get("visibility_timeout_ms")
    return ReceiveRequest(
        _int(raw.get("max_messages", RECEIVE_MESSAGES_DEFAULT), "max_messages", 1, RECEIVE_MESSAGES_MAX),
        None if visibility is None else _int(visibility, "visibility_timeout_ms", VISIBILITY_MS_MIN,
                                             VISIBILITY_MS_MAX),
        _int(raw.get("wait_ms", 0), "wait_ms", 0, wait_ms_max))


def parse_receipts(body: object, *, nack: bool) -> tuple[list[Receipt], int]:
    """The receipts of an ack or nack body and the nack's ``delay_ms`` (0 for an ack)."""
    raw = _object(body, {"receipts", "delay_ms"} if nack else {"receipts"}, {"receipts"})
    receipts = raw["receipts"]
    if not isinstance(receipts, list) or not 0 < len(receipts) <= RECEIPTS_PER_REQUEST_MAX:
        raise InvalidRequestError(f"receipts must be a non-empty array of at most {RECEIPTS_PER_REQUEST_MAX}")
    parsed = [parse_receipt(r) for r in receipts]
    if len(set(parsed)) != len(parsed):
        raise InvalidRequestError("receipts lists a receipt twice")
    return parsed, _int(raw.get("delay_ms", 0), "delay_ms", 0, NACK_DELAY_MS_MAX)
