"""What a live topic's config may become (``coordinator.topic_config``), alone: no node, no I/O."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.errors import InvalidTopicError
from coordinator.models import DEAD_LETTER_ID_KEY, TOPIC_CONFIG_BOUNDS, TopicMetadata
from coordinator.topic_config import FIXED_KEYS, KNOWN_KEYS, alter_config
from segments.config import MIB, LogConfig

BASE = LogConfig()


def topic(config: dict[str, Any] | None = None, *, kind: str = "topic", replication: int = 3) -> TopicMetadata:
    return TopicMetadata("orders", "id0", 4, replication, kind, dict(config or {}), "alice", 1)  # type: ignore[arg-type]


def alter(meta: TopicMetadata, changes: object) -> dict[str, Any]:
    return alter_config(meta, changes, base_config=BASE, bounds=TOPIC_CONFIG_BOUNDS)


def refused(meta: TopicMetadata, changes: object) -> InvalidTopicError:
    with pytest.raises(InvalidTopicError) as caught:
        alter(meta, changes)
    return caught.value


def test_changes_merge_over_the_stored_config_and_null_restores_the_default():
    meta = topic({"retention_ms": 60_000, "flush": "always"})
    assert alter(meta, {"retention_ms": 3_600_000, "min_insync_replicas": 3}) == {
        "retention_ms": 3_600_000, "flush": "always", "min_insync_replicas": 3}
    assert alter(meta, {"flush": None}) == {"retention_ms": 60_000}


def test_every_changeable_storage_key_is_accepted_within_its_bounds():
    changes = {"segment_bytes": 2 * MIB, "segment_ms": 3_600_000, "index_interval_bytes": 8192,
               "retention_ms": -1, "retention_bytes": 10 * MIB, "cleanup_policy": "delete", "flush": "interval",
               "flush_ms": 500, "max_batch_bytes": 16 * MIB, "dedup_window_ms": 0,
               "timestamp_after_max_ms": -1, "timestamp_before_max_ms": 86_400_000}
    assert alter(topic(), changes) == changes


@pytest.mark.parametrize(("changes", "field", "says"), [
    ({"retention_mz": 1}, "config.retention_mz", "unknown config key"),
    ({"partitions": 8}, "config.partitions", "/partitions"),
    ({"replication_factor": 2}, "config.replication_factor", "fixed"),
    ({"name": "other"}, "config.name", "renamed"),
    ({"kind": "queue"}, "config.kind", "queue"),
    ({"segment_index_bytes": MIB}, "config.segment_index_bytes", "index"),
    ({DEAD_LETTER_ID_KEY: "0" * 32}, f"config.{DEAD_LETTER_ID_KEY}", "broker"),
    ({"max_batch_bytes": 1024}, "config.max_batch_bytes", "only grow"),
    ({"segment_bytes": 1024}, "config.segment_bytes", "must be in"),
    ({"flush_ms": 1}, "config.flush_ms", "must be in"),
    ({"min_insync_replicas": 4}, "config.min_insync_replicas", "[1, 3]"),
    ({"min_insync_replicas": "2"}, "config.min_insync_replicas", "integer"),
    ({"dedup_window_ms": True}, "config.dedup_window_ms", "integer"),
    ({"timestamp_after_max_ms": -2}, "config.timestamp_after_max_ms", "-1"),
])
def test_bad_changes_are_refused_naming_the_key(changes, field, says):
    error = refused(topic(), changes)
    assert error.extra.get("field") == field and says in str(error), (error, error.extra)


@pytest.mark.parametrize("changes", [
    {"retention_ms": "soon"}, {"flush": "sometimes"}, {"cleanup_policy": "compacted"}, {"flush": 3},
    {"min_cleanable_dirty_ratio": 2},
    {"max_deliveries": 2},
])
def test_values_creation_refuses_are_refused_the_same_way(changes):
    key = next(iter(changes))
    assert key in str(refused(topic(), changes))


@pytest.mark.parametrize("body", [None, [], {}, "retention_ms=1", 3, [["retention_ms", 1]]])
def test_a_body_that_is_not_a_non_empty_object_is_refused(body):
    assert "non-empty JSON object" in str(refused(topic(), body))


def test_a_queue_keeps_its_dead_letter_binding_and_may_change_its_delivery_settings():
    meta = topic({"max_deliveries": 3, DEAD_LETTER_ID_KEY: "f" * 32}, kind="queue")
    changed = alter(meta, {"max_deliveries": 7, "visibility_timeout_ms": 60_000})
    assert changed == {"max_deliveries": 7, "visibility_timeout_ms": 60_000, DEAD_LETTER_ID_KEY: "f" * 32}
    assert "dead-letter" in str(refused(meta, {"dead_letter_topic": "elsewhere"}))
    assert "visibility_timeout_ms" in str(refused(meta, {"visibility_timeout_ms": 1}))


def test_only_the_changed_keys_are_held_to_the_user_bounds():
    """A key stored before the bounds (opened clamped) does not block a change of another key."""
    meta = topic({"segment_bytes": 4096})
    assert alter(meta, {"retention_ms": 1000}) == {"segment_bytes": 4096, "retention_ms": 1000}


def test_max_batch_bytes_may_grow_and_not_shrink_below_what_is_stored():
    meta = topic({"max_batch_bytes": 16 * MIB})
    assert alter(meta, {"max_batch_bytes": 32 * MIB})["max_batch_bytes"] == 32 * MIB
    assert refused(meta, {"max_batch_bytes": 8 * MIB}).extra["minimum"] == 16 * MIB
    assert "only grow" in str(refused(meta, {"max_batch_bytes": None}))  # the default, 8 MiB, is smaller


values = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**63, max_value=2**63),
                   st.text(max_size=12), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2))
keys = st.one_of(st.sampled_from(sorted(KNOWN_KEYS | set(FIXED_KEYS))), st.text(max_size=12))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(keys, values, max_size=4))
def test_any_change_is_either_refused_with_a_topic_error_or_gives_a_config_create_would_accept(changes):
    meta = topic({"retention_ms": 60_000}, replication=2)
    try:
        merged = alter(meta, changes)
    except InvalidTopicError as exc:
        assert str(exc)
        return
    assert all(value is not None for value in merged.values())
    assert not set(merged) & set(FIXED_KEYS)
    again = alter(topic(merged, replication=2), {"retention_ms": merged.get("retention_ms")})
    assert again == {k: v for k, v in merged.items() if k != "retention_ms" or v is not None}
