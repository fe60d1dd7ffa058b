"""Records at the edge of the broker (pure): parsing produce bodies, choosing partitions,
taking fetched records and rendering them as JSON.

Produce bodies are ``{"records": [{key, value, headers, partition, timestamp}]}`` as JSON (bytes as
UTF-8 strings, or ``key_b64``/``value_b64``) or msgpack (bytes as bytes). Headers are a list of
``[name, value]`` pairs or ``{"name", "value"|"value_b64"}`` objects, names may repeat. Fetched
bytes render as UTF-8 strings where they decode, else as base64 under ``*_b64`` keys.

Header names starting with ``x-logbroker-`` (in any case) are the broker's own (a dead letter's
origin): a produce or send that sets one is refused (decision 0173). "In any case" is Unicode case
folding (``is_reserved_header``), the one comparison every produce path uses: ``x-logbro\u212aer-``
(a Kelvin sign) is as reserved as ``X-LOGBROKER-``.

A stored batch whose records cannot be decoded (a prebuilt batch accepted before its rows were
checked at produce, decision 0220) never stops a reader: ``take_records`` and
``iter_fetched_records`` skip it, return the records around it and say which offsets they skipped
and why (``Skipped``); the caller reports them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

from logbroker.errors import InvalidBatchError, InvalidRequestError
from segments.batch import BATCH_RECORDS_MAX, BatchHeader, ProducerRecord, Record, decode_records, iter_batches
from segments.partitioning import DEFAULT_KEY_HASH, key_partition
from segments.record_reader import iter_records

# A request becomes at most one batch per partition, so it is held to what one batch may hold.
RECORDS_PER_REQUEST_MAX: Final = BATCH_RECORDS_MAX
HEADERS_PER_RECORD_MAX: Final = 1_000
RECORD_FIELDS: Final = frozenset({"key", "value", "key_b64", "value_b64", "headers", "partition", "timestamp"})
TIMESTAMP_MIN: Final = -(2**62)
TIMESTAMP_MAX: Final = 2**62
RESERVED_HEADER_PREFIX: Final = "x-logbroker-"


class Skipped(NamedTuple):
    """Offsets ``[first_offset, next_offset)`` of a stored batch a reader passed over because its
    records cannot be decoded (``reason``)."""

    first_offset: int
    next_offset: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"first_offset": self.first_offset, "next_offset": self.next_offset, "reason": self.reason}


class Taken(NamedTuple):
    """What ``take_records`` took: the records, the offset to read next when it stopped before the
    end of the fetched data (None: it took everything), and the ranges it skipped."""

    records: list[Record]
    stopped_at: int | None
    skipped: list[Skipped]


class IncomingRecord(NamedTuple):
    record: ProducerRecord
    partition: int | None


def parse_body(body: object, *, binary: bool) -> list[IncomingRecord]:
    """Validate a decoded produce body (JSON when ``binary`` is False, msgpack when True)."""
    if not isinstance(body, dict) or set(body) != {"records"}:
        raise InvalidRequestError('the body must be an object with exactly one field, "records"')
    records = body["records"]
    if not isinstance(records, list) or not records:
        raise InvalidRequestError("records must be a non-empty array")
    if len(records) > RECORDS_PER_REQUEST_MAX:
        raise InvalidRequestError(f"at most {RECORDS_PER_REQUEST_MAX} records per request")
    return [_parse_record(r, i, binary) for i, r in enumerate(records)]


def _parse_record(raw: object, index: int, binary: bool) -> IncomingRecord:
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"records[{index}] must be an object")
    unknown = set(raw) - RECORD_FIELDS
    if unknown:
        raise InvalidRequestError(f"records[{index}] has unknown fields {sorted(unknown)}")
    key = _bytes_field(raw, "key", index, binary)
    value = _bytes_field(raw, "value", index, binary)
    partition = raw.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int) or partition < 0):
        raise InvalidRequestError(f"records[{index}].partition must be a non-negative integer")
    timestamp = raw.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)
                                  or not TIMESTAMP_MIN <= timestamp <= TIMESTAMP_MAX):
        raise InvalidRequestError(f"records[{index}].timestamp must be an integer of milliseconds")
    headers = _headers(raw.get("headers", []), index, binary)
    return IncomingRecord(ProducerRecord(value, key, headers, timestamp), partition)


def _bytes_field(raw: dict[str, Any], name: str, index: int, binary: bool) -> bytes | None:
    plain, encoded = raw.get(name), raw.get(name + "_b64")
    if plain is not None and encoded is not None:
        raise InvalidRequestError(f"records[{index}] has both {name} and {name}_b64")
    if encoded is not None:
        return _b64(encoded, f"records[{index}].{name}_b64")
    if plain is None:
        return None
    if isinstance(plain, str):
        return plain.encode()
    if binary and isinstance(plain, bytes):
        return plain
    raise InvalidRequestError(f"records[{index}].{name} must be a string{' or bytes' if binary else ''}")


def _b64(value: object, where: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidRequestError(f"{where} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequestError(f"{where} is not valid base64") from exc


def _headers(raw: object, index: int, binary: bool) -> list[tuple[str, bytes]]:
    if isinstance(raw, dict):
        raw = [[k, v] for k, v in raw.items()]
    if not isinstance(raw, list) or len(raw) > HEADERS_PER_RECORD_MAX:
        raise InvalidRequestError(f"records[{index}].headers must be an array of at most {HEADERS_PER_RECORD_MAX}")
    out = []
    for h, item in enumerate(raw):
        where = f"records[{index}].headers[{h}]"
        if isinstance(item, dict):
            name, value = item.get("name"), item.get("value")
            if "value_b64" in item:
                value = _b64(item["value_b64"], where + ".value_b64")
        elif isinstance(item, list) and len(item) == 2:
            name, value = item
        else:
            raise InvalidRequestError(f"{where} must be [name, value] or {{name, value}}")
        if not isinstance(name, str):
            raise InvalidRequestError(f"{where} name must be a string")
        if is_reserved_header(name):
            raise InvalidRequestError(f"{where}: header names starting with {RESERVED_HEADER_PREFIX!r} are the "
                                      f"broker's own, not {name[:80]!r}")
        if isinstance(value, str):
            value = value.encode()
        if not isinstance(value, bytes):
            raise InvalidRequestError(f"{where} value must be a string{' or bytes' if binary else ''}")
        out.append((name, value))
    return out


def is_reserved_header(name: str) -> bool:
    """True when ``name`` starts with ``x-logbroker-`` once case-folded (Unicode: a Kelvin sign
    folds to ``k``). Folding maps each character to one or more, so folding the first
    ``len(prefix)`` characters decides it whatever the name's length."""
    return name[:len(RESERVED_HEADER_PREFIX)].casefold().startswith(RESERVED_HEADER_PREFIX)


def group_by_partition(records: Sequence[IncomingRecord], partitions: int,
                       round_robin: int, key_hash: str = DEFAULT_KEY_HASH) -> dict[int, list[int]]:
    """Indexes of ``records`` per partition, in request order. Explicit partitions win; keyed
    records hash (the topic's ``key_hash``, ``segments.partitioning``); keyless ones all go to
    ``round_robin % partitions`` (round-robin per batch)."""
    groups: dict[int, list[int]] = {}
    for i, (record, partition) in enumerate(records):
        if partition is None:
            partition = key_partition(record.key, partitions, key_hash) if record.key is not None \
                else round_robin % partitions
        elif partition >= partitions:
            raise InvalidRequestError(f"partition {partition} does not exist (the topic has {partitions})")
        groups.setdefault(partition, []).append(i)
    return groups


def take_records(data: bytes | memoryview, from_offset: int, records_max: int) -> Taken:
    """The first ``records_max`` records at or after ``from_offset`` in fetched batches.

    A batch wanted whole is decoded at once (fastest); of a batch that holds more than is still
    wanted, only the records taken are decoded. A batch that cannot be decoded gives the records
    before its first bad one and is skipped from there to its end (``Taken.skipped``)."""
    records: list[Record] = []
    skipped: list[Skipped] = []
    for position, header in iter_batches(data):
        batch = data[position:position + header.size_bytes]
        wanted = records_max - len(records)
        taken, skip = _readable(batch, header, from_offset, wanted)
        records.extend(taken)
        if skip is not None:
            skipped.append(skip)
        if len(records) >= records_max:
            del records[records_max:]
            return Taken(records, records[-1].offset + 1, skipped)
    return Taken(records, None, skipped)


def _readable(batch: bytes | memoryview, header: BatchHeader, from_offset: int,
              wanted: int) -> tuple[list[Record], Skipped | None]:
    """Up to ``wanted`` records of one batch at or after ``from_offset``; when the batch cannot be
    decoded, the records before its first bad one and the range skipped after them."""
    try:
        if header.record_count <= wanted:
            return [r for r in decode_records(batch) if r.offset >= from_offset], None
        return list(itertools.islice(iter_records(batch, from_offset=from_offset), wanted)), None
    except InvalidBatchError as exc:
        reason = str(exc)
    salvaged: list[Record] = []
    with contextlib.suppress(InvalidBatchError):
        salvaged.extend(itertools.islice(iter_records(batch, from_offset=from_offset), wanted))
    first = salvaged[-1].offset + 1 if salvaged else max(from_offset, header.base_offset)
    if len(salvaged) == wanted or first >= header.next_offset:
        return salvaged, None
    return salvaged, Skipped(first, header.next_offset, reason)


def iter_fetched_records(data: bytes | memoryview, from_offset: int, skipped: list[Skipped]) -> Iterator[Record]:
    """The records at or after ``from_offset`` in fetched batches, each decoded only when the
    iteration reaches it (a push stream takes them a few at a time). A batch that cannot be
    decoded ends at its first bad record: the rest of it is appended to ``skipped`` and the
    iteration goes on with the next batch."""
    for position, header in iter_batches(data):
        next_offset = max(from_offset, header.base_offset)
        try:
            for record in iter_records(data[position:position + header.size_bytes], from_offset=from_offset):
                next_offset = record.offset + 1
                yield record
        except InvalidBatchError as exc:
            if next_offset < header.next_offset:
                skipped.append(Skipped(next_offset, header.next_offset, str(exc)))


def render_records(records: Sequence[Record], *, force_base64: bool) -> list[dict[str, Any]]:
    """JSON form of fetched records (see module docstring for the bytes rule)."""
    return [_render(r, force_base64) for r in records]


def _render(record: Record, force_base64: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp}
    _put(out, "key", record.key, force_base64)
    _put(out, "value", record.value, force_base64)
    headers = []
    for name, value in record.headers:
        entry: dict[str, Any] = {"name": name}
        _put(entry, "value", value, force_base64)
        headers.append(entry)
    out["headers"] = headers
    return out


def _put(out: dict[str, Any], name: str, data: bytes | None, force_base64: bool) -> None:
    if data is None:
        out[name] = None
        return
    if not force_base64:
        try:
            out[name] = data.decode("utf-8")
            return
        except UnicodeDecodeError:
            pass
    out[name + "_b64"] = base64.b64encode(data).decode("ascii")
