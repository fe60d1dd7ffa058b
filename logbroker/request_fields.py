"""Checks shared by the request parsers of groups and queues (pure): a JSON object with known
fields, and a bounded integer that is not a bool. Failures are ``InvalidRequestError`` (400)."""

from __future__ import annotations

from typing import Any

from logbroker.errors import InvalidRequestError


def json_object(body: object, fields: set[str], required: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequestError("the body must be a JSON object")
    unknown = set(body) - fields
    if unknown:
        raise InvalidRequestError(f"unknown fields {sorted(unknown)}")
    missing = required - set(body)
    if missing:
        raise InvalidRequestError(f"missing fields {sorted(missing)}")
    return body


def bounded_int(value: object, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequestError(f"{what} must be an integer in [{low}, {high}], not {value!r}")
    return value
