"""Request and response bodies as kio's generated dataclasses (decision 0387), one class per API
version: ``read_request`` decodes a body, ``build`` makes a response of any version from one dict
of values (each version takes the fields it has and leaves the rest), ``encode`` writes it.

A handler therefore writes its answer once, as the newest version spells it, and every version
it advertises is answered with what that version can carry."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import types
import typing
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta, i64Timedelta


class BodyError(ValueError):
    """A request body that does not decode as its API version's schema."""


@functools.cache
def request_class(api_key: int, version: int) -> type[Any]:
    return load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


def flexible(api_key: int, version: int) -> bool:
    return bool(request_class(api_key, version).__flexible__)


def read_request(api_key: int, version: int, frame: bytes | memoryview, offset: int) -> Any:
    """The body of a request; ``BodyError`` when it does not decode. Bytes after the body are
    ignored, as a Kafka broker ignores them (librdkafka's Metadata v12 sends three more)."""
    cls = request_class(api_key, version)
    try:
        entity, _ = entity_reader(cls)(frame, offset)
    except Exception as exc:  # kio's readers raise assorted errors on malformed input
        raise BodyError(f"the {cls.__name__} v{version} body does not decode: {type(exc).__name__}") from None
    _check_nulls(entity)
    return entity


def _check_nulls(entity: Any) -> None:
    """``BodyError`` when a field the schema does not let be null is null (kio reads a null
    array wherever the bytes say so), in ``entity`` or the entities it holds."""
    for name, hint in _field_hints(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not _nullable(hint):
                raise BodyError(f"{type(entity).__name__}.{name} is null")
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    _check_nulls(item)
        elif dataclasses.is_dataclass(value):
            _check_nulls(value)


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """An instance of ``cls`` from ``values``: the fields ``cls`` declares, nested mappings and
    sequences of mappings made into its nested classes, error codes and durations as plain ints
(milliseconds); a missing field takes its default, and a None the version's field cannot carry
its empty string or bytes (else its default)."""
    kwargs: dict[str, Any] = {}
    for name, hint in _field_hints(cls):
        if name not in values:
            continue
        value = values[name]
        if value is None and not _nullable(hint):  # a null this version cannot carry: its empty value
            if hint not in (str, bytes):
                continue
            value = hint()
        kwargs[name] = _convert(hint, value)
    return cls(**kwargs)


def _nullable(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _convert(hint: Any, value: Any) -> Any:
    if hint is ErrorCode and isinstance(value, int):
        return ErrorCode(value)
    if hint in (i32Timedelta, i64Timedelta) and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    origin = typing.get_origin(hint)
    if origin is tuple and isinstance(value, (list, tuple)):
        (item,) = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return tuple(_convert(item, v) for v in value)
    if origin in (typing.Union, types.UnionType) and value is not None:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return build(hint, value)  # type: ignore[arg-type]
    return value


_FIELD_HINTS: dict[type[Any], tuple[tuple[str, Any], ...]] = {}


def _field_hints(cls: type[Any]) -> tuple[tuple[str, Any], ...]:
    """``cls``'s fields and their types, read once per class (the classes are a fixed set)."""
    found = _FIELD_HINTS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELD_HINTS[cls] = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
    return found
