"""Records between protobuf and the broker (pure): ``Record`` messages to ``IncomingRecord`` for
Publish, fetched ``Record`` tuples to messages for Subscribe.

Publish takes the same rules as an HTTP produce body (``logbroker.records.parse_body``): at most
``RECORDS_PER_REQUEST_MAX`` records, at least one, timestamps within range, no reserved header
names. Protobuf has no "absent" for scalars, so an empty ``key`` is no key, ``timestamp_ms`` 0 is
now, and ``partition`` is taken only when set (it is ``optional``). The records go straight to
``ProducerRecord`` without the dict form a JSON body needs: that detour cost a quarter of a
Publish's CPU on the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from logbroker.config import NodeConfig
from logbroker.errors import InvalidRequestError
from logbroker.records import (
    HEADERS_PER_RECORD_MAX,
    RECORDS_PER_REQUEST_MAX,
    RESERVED_HEADER_PREFIX,
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    IncomingRecord,
    is_reserved_header,
)
from segments.batch import ProducerRecord, Record

MESSAGE_OVERHEAD_BYTES: Final = 64 * 1024  # a message's fields besides its records' bytes


def message_bytes_max(config: NodeConfig) -> int:
    """The largest message a node's gRPC ends send or take: a request body's worth of records."""
    return config.request_body_bytes_max + MESSAGE_OVERHEAD_BYTES


def incoming_records(records: Sequence[Any]) -> list[IncomingRecord]:
    """The records of a ``PublishRequest``, validated as an HTTP produce body is."""
    if not records:
        raise InvalidRequestError("records must not be empty")
    if len(records) > RECORDS_PER_REQUEST_MAX:
        raise InvalidRequestError(f"at most {RECORDS_PER_REQUEST_MAX} records per request")
    return [_incoming(record, index) for index, record in enumerate(records)]


def _incoming(record: Any, index: int) -> IncomingRecord:
    timestamp = record.timestamp_ms or None
    if timestamp is not None and not TIMESTAMP_MIN <= timestamp <= TIMESTAMP_MAX:
        raise InvalidRequestError(f"records[{index}].timestamp_ms must be an integer of milliseconds")
    headers: list[tuple[str, bytes]] = []
    if record.headers:
        if len(record.headers) > HEADERS_PER_RECORD_MAX:
            raise InvalidRequestError(f"records[{index}].headers: at most {HEADERS_PER_RECORD_MAX}")
        for name, value in record.headers.items():
            if is_reserved_header(name):
                raise InvalidRequestError(f"records[{index}].headers: names starting with "
                                          f"{RESERVED_HEADER_PREFIX!r} are the broker's own, not {name[:80]!r}")
            headers.append((name, value))
    partition = record.partition if record.HasField("partition") else None
    if partition is not None and partition < 0:
        raise InvalidRequestError(f"records[{index}].partition must be a non-negative integer")
    return IncomingRecord(ProducerRecord(record.value, record.key or None, headers, timestamp), partition)


def record_messages(record_type: Any, topic: str, partition: int, records: Iterable[Record]) -> list[Any]:
    """``Record`` messages of fetched records (a record with no key or value gets empty bytes)."""
    return [record_type(topic=topic, partition=partition, offset=r.offset, timestamp_ms=r.timestamp,
                        key=r.key or b"", value=r.value or b"", headers=dict(r.headers) if r.headers else None)
            for r in records]
