"""Validation of group request bodies (pure): every malformed body is an ``InvalidRequestError``
raised before anything changes."""

from __future__ import annotations

import dataclasses
from typing import Final

from coordinator.models import validate_name
from logbroker.errors import InvalidRequestError
from logbroker.groups.assignment import STRATEGIES, Strategy
from logbroker.groups.commit_order import NO_SEQUENCE
from logbroker.request_fields import bounded_int as _int
from logbroker.request_fields import json_object as _object

SESSION_TIMEOUT_MS_MIN: Final = 100
SESSION_TIMEOUT_MS_MAX: Final = 300_000
SESSION_TIMEOUT_MS_DEFAULT: Final = 10_000
TOPICS_PER_MEMBER_MAX: Final = 100
OFFSETS_PER_COMMIT_MAX: Final = 10_000
OFFSET_MAX: Final = 2**63 - 1
MEMBER_ID_CHARS_MAX: Final = 64
RESET_TARGETS: Final = ("earliest", "latest", "timestamp", "offsets")


@dataclasses.dataclass(frozen=True, slots=True)
class JoinRequest:
    topics: tuple[str, ...]
    session_timeout_ms: int
    strategy: Strategy | None
    member_id: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class CommitRequest:
    member_id: str
    generation: int
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, offset)
    sequence: int = NO_SEQUENCE  # the member's number for this commit (``commit_order``)


@dataclasses.dataclass(frozen=True, slots=True)
class ResetRequest:
    topic: str
    to: str
    partitions: tuple[int, ...] | None
    timestamp: int | None
    offsets: tuple[tuple[int, int], ...]  # (partition, offset) for to="offsets"




def member_id(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MEMBER_ID_CHARS_MAX or not value.isascii() \
            or not value.replace("-", "").isalnum():
        raise InvalidRequestError(f"member_id must be a member id from join, not {value!r}")
    return value


def group_name(value: object) -> str:
    return validate_name(value, what="group")


def parse_join(body: object) -> JoinRequest:
    raw = _object(body, {"topics", "session_timeout_ms", "assignment_strategy", "member_id"}, {"topics"})
    topics = raw["topics"]
    if not isinstance(topics, list) or not 0 < len(topics) <= TOPICS_PER_MEMBER_MAX:
        raise InvalidRequestError(f"topics must be a non-empty array of at most {TOPICS_PER_MEMBER_MAX} names")
    names = tuple(sorted({validate_name(t) for t in topics}))
    timeout = _int(raw.get("session_timeout_ms", SESSION_TIMEOUT_MS_DEFAULT), "session_timeout_ms",
                   SESSION_TIMEOUT_MS_MIN, SESSION_TIMEOUT_MS_MAX)
    strategy = raw.get("assignment_strategy")
    if strategy is not None and strategy not in STRATEGIES:
        raise InvalidRequestError(f"assignment_strategy must be one of {list(STRATEGIES)}, not {strategy!r}")
    given = raw.get("member_id")
    return JoinRequest(names, timeout, strategy, None if given is None else member_id(given))


def parse_commit(body: object) -> CommitRequest:
    raw = _object(body, {"member_id", "generation", "offsets", "sequence"}, {"member_id", "generation", "offsets"})
    offsets = raw["offsets"]
    if not isinstance(offsets, list) or not 0 < len(offsets) <= OFFSETS_PER_COMMIT_MAX:
        raise InvalidRequestError(f"offsets must be a non-empty array of at most {OFFSETS_PER_COMMIT_MAX}")
    parsed = []
    for i, item in enumerate(offsets):
        entry = _object(item, {"topic", "partition", "offset"}, {"topic", "partition", "offset"})
        parsed.append((validate_name(entry["topic"]), _int(entry["partition"], f"offsets[{i}].partition", 0, 2**31),
                       _int(entry["offset"], f"offsets[{i}].offset", 0, OFFSET_MAX)))
    if len({(t, p) for t, p, _ in parsed}) != len(parsed):
        raise InvalidRequestError("offsets names a partition twice")
    sequence = NO_SEQUENCE if raw.get("sequence") is None else _int(raw["sequence"], "sequence", 0, OFFSET_MAX)
    return CommitRequest(member_id(raw["member_id"]), _int(raw["generation"], "generation", 0, OFFSET_MAX),
                         tuple(parsed), sequence)


def parse_reset(body: object) -> ResetRequest:
    raw = _object(body, {"topic", "to", "partitions", "timestamp", "offsets"}, {"topic", "to"})
    topic = validate_name(raw["topic"])
    to = raw["to"]
    if to not in RESET_TARGETS:
        raise InvalidRequestError(f"to must be one of {list(RESET_TARGETS)}, not {to!r}")
    partitions = raw.get("partitions")
    if partitions is not None:
        if not isinstance(partitions, list) or not partitions or len(partitions) > OFFSETS_PER_COMMIT_MAX:
            raise InvalidRequestError("partitions must be a non-empty array of partition numbers")
        partitions = tuple(sorted({_int(p, "partitions[]", 0, 2**31) for p in partitions}))
    timestamp = raw.get("timestamp")
    if (to == "timestamp") != (timestamp is not None):
        raise InvalidRequestError('timestamp is required with to="timestamp" and only then')
    if timestamp is not None:
        timestamp = _int(timestamp, "timestamp", 0, OFFSET_MAX)
    explicit = raw.get("offsets")
    if (to == "offsets") != (explicit is not None):
        raise InvalidRequestError('offsets is required with to="offsets" and only then')
    pairs: list[tuple[int, int]] = []
    if explicit is not None:
        if not isinstance(explicit, list) or not explicit or len(explicit) > OFFSETS_PER_COMMIT_MAX:
            raise InvalidRequestError("offsets must be a non-empty array of {partition, offset}")
        for i, item in enumerate(explicit):
            entry = _object(item, {"partition", "offset"}, {"partition", "offset"})
            pairs.append((_int(entry["partition"], f"offsets[{i}].partition", 0, 2**31),
                          _int(entry["offset"], f"offsets[{i}].offset", 0, OFFSET_MAX)))
        if partitions is not None:
            raise InvalidRequestError('partitions does not apply to to="offsets"')
    return ResetRequest(topic, to, partitions, timestamp, tuple(pairs))
