"""A topic's config as clients are shown it (pure): every key that decides its behaviour, with
the value in force, defaults included, so describe, ``/v1/cluster`` and the console agree."""

from __future__ import annotations

from typing import Any

from coordinator.leader_racks import LEADER_RACKS_KEY, leader_racks
from coordinator.models import (
    ENCRYPTION_CONFIG_KEY,
    TIMESTAMP_AFTER_KEY,
    TIMESTAMP_BEFORE_KEY,
    TopicMetadata,
    TopicSpec,
)
from logbroker.dedup import WINDOW_KEY, WINDOW_MS_DEFAULT
from logbroker.partition_state import MIN_INSYNC_KEY, min_insync_replicas
from logbroker.timestamps import TimestampWindow
from segments.config import LogConfig
from segments.partitioning import DEFAULT_KEY_HASH, KEY_HASH_KEY


def described_config(meta: TopicMetadata, log_config: LogConfig, *, encrypted_by_default: bool = False
                     ) -> dict[str, Any]:
    """The storage config in force (``log_config``), the replication and produce rules, whether
    new batches are encrypted at rest (``encrypted_by_default``: the node has a key ring), and a
    queue's delivery settings."""
    config = log_config.to_mapping()
    window = TimestampWindow.of(meta.config)
    dedup = meta.config.get(WINDOW_KEY)
    config.update({
        MIN_INSYNC_KEY: min_insync_replicas(meta.config, meta.replication_factor),
        WINDOW_KEY: dedup if isinstance(dedup, int) and not isinstance(dedup, bool) else WINDOW_MS_DEFAULT,
        TIMESTAMP_AFTER_KEY: window.after_max_ms, TIMESTAMP_BEFORE_KEY: window.before_max_ms,
        LEADER_RACKS_KEY: list(leader_racks(meta.config)),  # [] when any rack may lead
        ENCRYPTION_CONFIG_KEY: meta.config.get(ENCRYPTION_CONFIG_KEY, "on" if encrypted_by_default else "off"),
        KEY_HASH_KEY: meta.config.get(KEY_HASH_KEY, DEFAULT_KEY_HASH),
    })
    if meta.kind == "queue":
        config.update(TopicSpec(meta.name, meta.partitions, None, meta.kind, meta.config).queue_settings())
    return config
