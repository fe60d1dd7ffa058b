"""Per-user usage totals in ``/metrics`` (read at scrape time from the ledger's running totals).

Cardinality stays bounded: the ``USERS_LABELLED_MAX`` users who moved the most bytes get their own
label; the rest are summed under ``user="*"``. Totals count since the node started (counters), so
``rate()`` gives each user's traffic through this node.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from logbroker.metering.ledger import OTHER, Counts

USERS_LABELLED_MAX: Final = 1_000
SERIES: Final = (("bytes_in", "Bytes the user produced through this node"),
                 ("records_in", "Records the user produced through this node"),
                 ("bytes_out", "Bytes the user read through this node"),
                 ("records_out", "Records the user read through this node"),
                 ("requests", "Produce, fetch and stream calls the user made to this node"))


class UsageCollector(Collector):
    def __init__(self, totals: Callable[[], Mapping[str, Counts]]) -> None:
        self._totals = totals

    def collect(self) -> Iterator[CounterMetricFamily]:
        totals = self._totals()
        named = heapq.nlargest(USERS_LABELLED_MAX, totals, key=lambda u: totals[u].bytes_in + totals[u].bytes_out)
        labelled = set(named)
        rest = Counts()
        for user, counts in totals.items():
            if user not in labelled:
                for field, _ in SERIES:
                    setattr(rest, field, getattr(rest, field) + getattr(counts, field))
        for field, text in SERIES:
            family = CounterMetricFamily(f"logbroker_user_{field}", text, labels=["user"])
            for user in named:
                family.add_metric([user], getattr(totals[user], field))
            if len(totals) > len(named):
                family.add_metric([OTHER], getattr(rest, field))
            yield family
