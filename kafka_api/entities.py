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
from collections.abc import Callable, Mapping
from typing import Any, Final

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
    for name, nullable, holds in _null_plan(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                raise BodyError(f"{type(entity).__name__}.{name} is null")
        elif holds is _ENTITY:
            _check_nulls(value)
        elif holds is _ENTITIES:
            for item in value:
                _check_nulls(item)


_ENTITY: Final = "entity"
_ENTITIES: Final = "entities"
NullPlan = tuple[tuple[str, bool, str | None], ...]
_NULL_PLANS: dict[type[Any], NullPlan] = {}


def _null_plan(cls: type[Any]) -> NullPlan:
    """Per field of ``cls``: its name, whether it may be null, and whether it holds an entity or a
    sequence of them (whose fields are checked in turn); worked out once per class."""
    found = _NULL_PLANS.get(cls)
    if found is None:
        plan = []
        for name, hint in _field_hints(cls):
            inner = [a for a in typing.get_args(hint) if a is not type(None)] if _nullable(hint) else [hint]
            kind = inner[0] if len(inner) == 1 else None
            items = [a for a in typing.get_args(kind) if a is not Ellipsis] if typing.get_origin(kind) is tuple else []
            holds = _ENTITY if dataclasses.is_dataclass(kind) else \
                _ENTITIES if len(items) == 1 and dataclasses.is_dataclass(items[0]) else None
            plan.append((name, _nullable(hint), holds))
        found = _NULL_PLANS[cls] = tuple(plan)
    return found


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """An instance of ``cls`` from ``values``: the fields ``cls`` declares, nested mappings and
    sequences of mappings made into its nested classes, error codes and durations as plain ints
    (milliseconds); a missing field takes its default, and a None the version's field cannot carry
    its empty string or bytes (else its default). Each class's recipe is worked out once from its
    type hints (``_recipe``): a response is built on every request's path."""
    kwargs: dict[str, Any] = {}
    for name, convert, null_as in _recipe(cls):
        if name not in values:
            continue
        value = values[name]
        if value is None and null_as is not _NULLABLE:  # a null this version cannot carry: its empty value
            if null_as is None:
                continue
            value = null_as
        kwargs[name] = value if convert is None else convert(value)
    return cls(**kwargs)


Convert = Callable[[Any], Any]
_NULLABLE: Final = object()  # a field that carries None as it is


Recipe = tuple[tuple[str, Convert | None, Any], ...]
_RECIPES: dict[type[Any], Recipe] = {}


def _recipe(cls: type[Any]) -> Recipe:
    """Per field of ``cls``: its name, how a value is made into what the field holds (None: as it
    is), and what a None becomes (``_NULLABLE``: None; None: the field is left to its default)."""
    found = _RECIPES.get(cls)
    if found is None:
        found = _RECIPES[cls] = tuple(
            (name, _converter(hint), _NULLABLE if _nullable(hint) else hint() if hint in (str, bytes) else None)
            for name, hint in _field_hints(cls))
    return found


def _nullable(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


@functools.cache
def _converter(hint: Any) -> Convert | None:
    """How a value given for a field of type ``hint`` is made into one (None: taken as it is)."""
    if hint is ErrorCode:
        return lambda value: ErrorCode(value) if isinstance(value, int) else value
    if hint in (i32Timedelta, i64Timedelta):
        return lambda value: datetime.timedelta(milliseconds=value) if isinstance(value, int) else value
    origin = typing.get_origin(hint)
    if origin is tuple:
        (item,) = [a for a in typing.get_args(hint) if a is not Ellipsis]
        each = _converter(item)

        def sequence(value: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                return value
            return tuple(value) if each is None else tuple(each(v) for v in value)
        return sequence
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        one = _converter(inner[0]) if len(inner) == 1 else None
        return None if one is None else lambda value: None if value is None else one(value)
    if dataclasses.is_dataclass(hint):
        return lambda value: build(hint, value) if isinstance(value, Mapping) else value  # type: ignore[arg-type]
    return None


_FIELD_HINTS: dict[type[Any], tuple[tuple[str, Any], ...]] = {}


def _field_hints(cls: type[Any]) -> tuple[tuple[str, Any], ...]:
    """``cls``'s fields and their types, read once per class (the classes are a fixed set)."""
    found = _FIELD_HINTS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELD_HINTS[cls] = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
    return found
