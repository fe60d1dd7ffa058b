"""Kafka clients in tests: read a partition's values with a librdkafka consumer, bounded."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import TopicPartition


def read_values(consumer: Any, topic: str, partition: int, count: int, timeout_s: float) -> list[bytes | None]:
    """The values of the first ``count`` records of ``topic``'s ``partition`` from offset 0 (fewer
    when ``timeout_s`` passes first); the consumer is closed after."""
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        return got
    finally:
        consumer.close()
