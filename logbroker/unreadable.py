"""Reporting stored batches a reader skipped because their records cannot be decoded (decision
0220): every reader (JSON fetch, push streams, gRPC, queues) delivers the records around such a
batch and reports the offsets it passed over here, as a log line and the
``logbroker_unreadable_records_skipped`` counter, besides telling its own caller where it can."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from logbroker.records import Skipped

log = logging.getLogger(__name__)
# (topic, reader, offsets skipped): ``Metrics.count_skipped``.
CountSkipped = Callable[[str, str, int], None]


def report_skipped(count: CountSkipped, topic: str, partition: int, skipped: Sequence[Skipped],
                   reader: str) -> None:
    """Log and count each skipped range of ``topic``/``partition`` that ``reader`` passed over."""
    for skip in skipped:
        count(topic, reader, skip.next_offset - skip.first_offset)
        log.warning("skipped stored records that cannot be decoded", extra={"fields": {
            "topic": topic, "partition": partition, "first_offset": skip.first_offset,
            "next_offset": skip.next_offset, "reader": reader, "reason": skip.reason[:200]}})
