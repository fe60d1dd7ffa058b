"""A fetched slice turned into the ``Record`` messages a subscriber receives (a partition's or a
group member's; ``StreamDoor.fetch`` charged it when it was read): records that cannot be
decoded are reported and skipped, so the ones around them go on (decision 0220)."""

from __future__ import annotations

from typing import Any, Protocol

from grpc_api import stubs
from grpc_api.convert import record_messages
from logbroker.node import Node
from logbroker.records import Skipped, iter_fetched_records
from logbroker.unreadable import report_skipped

pb, _ = stubs.load()


class Fetched(Protocol):
    """What a fetch answered: whole batches and the offset after them."""

    @property
    def data(self) -> bytes | memoryview: ...

    @property
    def next_offset(self) -> int: ...


def delivered(node: Node, topic: str, partition: int, offset: int, result: Fetched) -> list[Any]:
    """The messages for the records of ``result`` from ``offset`` on."""
    skipped: list[Skipped] = []
    batch = record_messages(pb.Record, topic, partition, iter_fetched_records(bytes(result.data), offset, skipped))
    if skipped:
        report_skipped(node.metrics.count_skipped, topic, partition, skipped, "grpc")
    return batch
