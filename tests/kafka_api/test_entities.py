"""Responses built from one dict of values, for every API version the listener serves
(``kafka_api.entities.build``): each built response encodes and reads back as itself, and carries
the values it was given in the types its fields hold."""

from __future__ import annotations

import dataclasses
import datetime
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kafka_api import entities
from kafka_api.apis import BY_KEY

SERVED = [(api.key, version) for api in BY_KEY.values() for version in range(api.min_version, api.max_version + 1)]
WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def sample(hint: Any) -> Any:
    """A plain value for a field of type ``hint``, as a handler writes it: ints for error codes
    and durations, dicts and lists for nested entities."""
    if hint is ErrorCode:
        return 3
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return 7
    origin = typing.get_origin(hint)
    if origin is tuple:
        (item,) = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return [sample(item), sample(item)]
    if origin is not None:  # Optional[X]
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return sample(inner)
    if dataclasses.is_dataclass(hint):
        return {name: sample(h) for name, h in entities._field_hints(hint)}
    if isinstance(hint, type):
        for base, value in ((bool, True), (int, 5), (str, "s"), (bytes, b"b"), (uuid.UUID, uuid.UUID(int=9)),
                            (datetime.datetime, WHEN)):
            if issubclass(hint, base):
                return value
    raise AssertionError(f"no sample for {hint!r}")


def plain(entity: Any) -> Any:
    """``entity`` as the dicts, lists and ints ``sample`` made it from."""
    if dataclasses.is_dataclass(entity):
        return {f.name: plain(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    if isinstance(entity, tuple):
        return [plain(v) for v in entity]
    if isinstance(entity, datetime.timedelta):
        return round(entity.total_seconds() * 1000)
    if isinstance(entity, ErrorCode):
        return int(entity)
    return entity


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_a_response_built_from_values_encodes_and_reads_back_with_them(api_key, version):
    cls = entities.response_class(api_key, version)
    values = sample(cls)
    built = entities.build(cls, values)
    assert plain(built) == values
    read, size = entity_reader(cls)(entities.encode(built), 0)
    assert read == built and size == len(entities.encode(built))


def test_fields_a_version_lacks_are_left_out_and_nulls_it_cannot_carry_become_empty():
    cls = entities.response_class(0, 3)  # Produce v3: no log_start_offset, no record errors, no error message
    built = entities.build(cls, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 4, "log_start_offset": 2, "error_message": "x"}]}],
        "throttle_time": 9, "not_a_field": 1})
    part = built.responses[0].partition_responses[0]
    assert (part.index, part.error_code, part.base_offset) == (0, ErrorCode.none, 4)
    assert not hasattr(part, "log_start_offset") and built.throttle_time == datetime.timedelta(milliseconds=9)
    metadata = entities.build(entities.response_class(3, 1), {"brokers": [{"node_id": 1, "host": None, "port": 9,
                                                                            "rack": None}], "topics": []})
    assert metadata.brokers[0].rack is None, "a nullable field keeps its null"
    assert metadata.brokers[0].host == "", "a null a field cannot carry is its empty string"


def produce_v3_body(*, transactional_id: bytes, name: bytes, partitions: bytes) -> bytes:
    """A Produce v3 body: acks 1, timeout 1 s, one topic."""
    return transactional_id + struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + name + partitions


ONE_PARTITION = struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 3) + b"abc"


def test_a_request_reads_with_its_nullable_fields_null():
    body = produce_v3_body(transactional_id=struct.pack(">h", -1), name=struct.pack(">h", 1) + b"t",
                           partitions=ONE_PARTITION)
    request = entities.read_request(0, 3, body, 0)
    assert request.transactional_id is None and request.topic_data[0].partition_data[0].records == b"abc"


@pytest.mark.parametrize(("what", "body"), [
    ("a topic's name", produce_v3_body(transactional_id=struct.pack(">h", -1), name=struct.pack(">h", -1),
                                       partitions=ONE_PARTITION)),
    ("a topic's partitions", produce_v3_body(transactional_id=struct.pack(">h", -1),
                                             name=struct.pack(">h", 1) + b"t", partitions=struct.pack(">i", -1))),
])
def test_a_null_where_the_schema_allows_none_is_a_body_error(what, body):
    with pytest.raises(entities.BodyError, match=r"(?i)null"):
        entities.read_request(0, 3, body, 0)
