"""Kafka's error numbers are named once (``logbroker.kafka_error_numbers``) and are Kafka's: each
matches the protocol library's table by name, and none is named twice."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from logbroker import error_codes, kafka_error_numbers


def _numbers() -> dict[str, int]:
    return {name: value for name, value in vars(kafka_error_numbers).items()
            if name.isupper() and isinstance(value, int)}


def test_every_number_is_kafkas_own_for_its_name():
    numbers = _numbers()
    assert len(numbers) >= 40
    for name, value in numbers.items():
        assert ErrorCode[name.lower()].value == value, name


def test_no_number_is_named_twice_and_the_error_table_uses_only_these():
    numbers = _numbers()
    assert len(set(numbers.values())) == len(numbers)
    assert {answer.kafka for answer in error_codes.ANSWERS.values()} <= set(numbers.values())
