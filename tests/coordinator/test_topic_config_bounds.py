"""A user's topic config is held to ``TOPIC_CONFIG_BOUNDS``; stored configs are clamped into them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.errors import InvalidTopicError
from coordinator.models import (
    NOT_CLAMPED,
    TOPIC_CONFIG_BOUNDS,
    ConfigBounds,
    TopicSpec,
    clamp_config,
    topic_config_bounds,
)
from segments.config import LogConfig

BOUNDED = sorted(TOPIC_CONFIG_BOUNDS)


def parse(config: dict[str, object], bounds: ConfigBounds = TOPIC_CONFIG_BOUNDS) -> TopicSpec:
    return TopicSpec.parse({"name": "t", "config": config}, base_config=LogConfig(), bounds=bounds)


@pytest.mark.parametrize("key", BOUNDED)
def test_each_bound_is_inclusive_and_a_value_past_it_names_the_field(key: str) -> None:
    low, high = TOPIC_CONFIG_BOUNDS[key]
    for value in (low, high):
        if value <= 2**62:
            assert parse({key: value}).config[key] == value
    for value in (low - 1, high + 1):
        with pytest.raises(InvalidTopicError) as caught:
            parse({key: value})
        assert caught.value.extra == {"field": f"config.{key}", "minimum": low, "maximum": high}
        assert f"config.{key}" in str(caught.value) and str(low) in str(caught.value)


def test_the_attack_config_is_refused() -> None:
    with pytest.raises(InvalidTopicError, match=r"config\.segment_bytes must be in \[1048576, "):
        parse({"segment_bytes": 65})
    with pytest.raises(InvalidTopicError, match=r"config\.segment_ms"):
        parse({"segment_ms": "1"})  # strings are numbers too, and held to the same bounds


def test_the_defaults_and_unset_keys_are_within_the_bounds() -> None:
    assert clamp_config(LogConfig(), TOPIC_CONFIG_BOUNDS) == LogConfig()
    assert parse({"retention_ms": 5, "retention_bytes": 0}).config == {"retention_ms": 5, "retention_bytes": 0}


def test_the_node_may_lower_the_segment_floor() -> None:
    bounds = topic_config_bounds(1024)
    assert parse({"segment_bytes": 1024}, bounds=bounds).config["segment_bytes"] == 1024
    with pytest.raises(InvalidTopicError):
        parse({"segment_bytes": 1023}, bounds=bounds)
    assert {k: v for k, v in bounds.items() if k != "segment_bytes"} == \
        {k: v for k, v in TOPIC_CONFIG_BOUNDS.items() if k != "segment_bytes"}


STORED = st.fixed_dictionaries({}, optional={  # what the storage engine accepts, bounds or not
    "segment_bytes": st.integers(65, 2**31 - 1), "segment_ms": st.integers(1, 2**62),
    "segment_index_bytes": st.integers(12, 2**31), "index_interval_bytes": st.integers(0, 2**31),
    "flush_ms": st.integers(1, 2**62), "max_batch_bytes": st.integers(65, 2**31 - 1),
    "retention_ms": st.integers(-1, 2**62)})


@given(STORED)
def test_a_stored_config_is_clamped_into_the_bounds(stored: dict[str, int]) -> None:
    config = LogConfig.from_mapping(stored)
    clamped = clamp_config(config, TOPIC_CONFIG_BOUNDS)
    for key, (low, high) in TOPIC_CONFIG_BOUNDS.items():
        value = getattr(config, key)
        if key in NOT_CLAMPED:  # what is already stored was written under the old value
            assert getattr(clamped, key) == value
        else:
            assert getattr(clamped, key) == min(max(value, low), high)
    unbounded = [f.name for f in dataclasses.fields(LogConfig) if f.name not in TOPIC_CONFIG_BOUNDS]
    assert all(getattr(clamped, name) == getattr(config, name) for name in unbounded)


@pytest.mark.parametrize("raw", ["\u00b9", "\u0660", "1_000", "1e6", "0x10", "9" * 30])
def test_numbers_in_strings_are_ascii_digits(raw: str) -> None:
    for key in ("segment_bytes", "retention_ms"):
        with pytest.raises(InvalidTopicError):
            parse({key: raw})
