"""What a live topic's config may become (pure: no I/O; decision 0275).

``alter_config`` turns a client's change (``{key: value}``; ``null`` puts a key back to its
default) into the topic's new stored config, or refuses it with ``InvalidTopicError`` naming the
key (``field``) and why. The merged config is checked by ``TopicSpec.parse``, the same rules a new
topic is held to, so one place decides what is valid; only the changed keys are held to the
user bounds (a key stored before the bounds keeps opening clamped, as ``clamp_config`` says).

Invariant: a key is changeable only when every node can make it take effect on an open log,
leadership or queue without a restart. Refused, with the reason: the topic's shape (``name``,
``kind``, ``partitions``, ``replication_factor``), ``key_hash`` (a key's records would part),
``segment_index_bytes`` (each segment's index is pre-sized when the segment opens),
``dead_letter_topic`` (a queue is bound to its dead-letter topic's id at creation), the broker's
own ``dead_letter_topic_id``, and a smaller ``max_batch_bytes`` (stored batches are scanned with
it: a smaller one would read them as corrupt).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from coordinator.errors import InvalidTopicError
from coordinator.models import (
    DEAD_LETTER_ID_KEY,
    ENCRYPTION_CONFIG_KEY,
    QUEUE_CONFIG_KEYS,
    REPLICATION_CONFIG_KEYS,
    TIMESTAMP_WINDOW_KEYS,
    ConfigBounds,
    TopicMetadata,
    TopicSpec,
)
from segments.config import LogConfig
from segments.partitioning import KEY_HASH_KEY

STORAGE_KEYS: Final = frozenset(f.name for f in dataclasses.fields(LogConfig))
KNOWN_KEYS: Final = (STORAGE_KEYS | QUEUE_CONFIG_KEYS | REPLICATION_CONFIG_KEYS | TIMESTAMP_WINDOW_KEYS
                     | {ENCRYPTION_CONFIG_KEY, KEY_HASH_KEY})
# Keys a client may name that cannot change on a live topic, and why (the message says which).
FIXED_KEYS: Final[Mapping[str, str]] = {
    "name": "a topic cannot be renamed",
    "kind": "a topic cannot become a queue or a queue a topic",
    "partitions": "the partition count grows with POST /v1/topics/{name}/partitions, not as a config key",
    "replication_factor": "the replication factor is fixed when the topic is placed",
    "segment_index_bytes": "each segment's index is sized when the segment opens; it cannot change on a live topic",
    KEY_HASH_KEY: "records already stored by a key's partition would no longer be where its new records go",
    "dead_letter_topic": "a queue is bound to its dead-letter topic when it is created",
    DEAD_LETTER_ID_KEY: "it is set by the broker, not by clients",
}
GROW_ONLY_KEYS: Final[Mapping[str, str]] = {
    "max_batch_bytes": "stored batches are read with this limit, so it may only grow on a live topic",
}
CHANGES_MAX: Final = len(KNOWN_KEYS)


def _refuse(key: str, reason: str, **extra: Any) -> InvalidTopicError:
    return InvalidTopicError(f"config.{key} cannot be changed: {reason}", field=f"config.{key}", **extra)


def check_changes(changes: object) -> dict[str, Any]:
    """``changes`` if it is a non-empty JSON object of known, changeable keys (values checked later)."""
    if not isinstance(changes, dict) or not changes:
        raise InvalidTopicError("the body must be a non-empty JSON object of the config keys to change "
                                '(e.g. {"retention_ms": 3600000}; null puts a key back to its default)')
    if len(changes) > CHANGES_MAX:
        raise InvalidTopicError(f"at most {CHANGES_MAX} keys may change at once, not {len(changes)}")
    for key in sorted(changes):
        if key in FIXED_KEYS:
            raise _refuse(key, FIXED_KEYS[key])
        if key not in KNOWN_KEYS:
            raise InvalidTopicError(f"unknown config key {key!r}; the keys are {', '.join(sorted(KNOWN_KEYS))}",
                                    field=f"config.{key}")
    return dict(changes)


def alter_config(meta: TopicMetadata, changes: object, *, base_config: LogConfig,
                 bounds: ConfigBounds) -> dict[str, Any]:
    """The stored config of ``meta`` once ``changes`` apply (``InvalidTopicError`` naming the
    first bad key: nothing is changed then)."""
    wanted = check_changes(changes)
    stored = {k: v for k, v in meta.config.items() if k != DEAD_LETTER_ID_KEY}
    merged = {k: v for k, v in {**stored, **wanted}.items() if v is not None}
    changed_bounds = {k: v for k, v in bounds.items() if k in wanted}
    body = {"name": meta.name, "partitions": meta.partitions, "replication_factor": meta.replication_factor,
            "kind": meta.kind, "config": merged}
    spec = TopicSpec.parse(body, base_config=base_config, bounds=changed_bounds)
    before = TopicSpec(meta.name, meta.partitions, meta.replication_factor, meta.kind, stored).log_config(base_config)
    after = spec.log_config(base_config)
    for key, reason in GROW_ONLY_KEYS.items():
        if key in wanted and getattr(after, key) < getattr(before, key):
            raise _refuse(key, f"{reason} (now {getattr(before, key)}, asked {getattr(after, key)})",
                          minimum=getattr(before, key))
    if DEAD_LETTER_ID_KEY in meta.config:
        merged[DEAD_LETTER_ID_KEY] = meta.config[DEAD_LETTER_ID_KEY]
    return merged
