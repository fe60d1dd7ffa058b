"""Prometheus gauges of consumer groups and queues, read from their state at scrape time.

Per-group series are bounded: past ``GROUP_SERIES_MAX`` groups (a node may hold 100,000), only
that many are itemized, groups with members first, and ``logbroker_group_series_omitted`` says how
many were left out, so that a scrape costs a bounded time whatever the number of groups.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from logbroker.groups.coordinator import GroupCoordinator
from logbroker.queues.manager import QueueManager

GROUP_SERIES_MAX: Final = 1_000


class GroupQueueCollector(Collector):
    def __init__(self, groups: Callable[[], GroupCoordinator | None], queues: QueueManager) -> None:
        self._groups = groups
        self._queues = queues

    def collect(self) -> Iterator[GaugeMetricFamily]:
        members = GaugeMetricFamily("logbroker_group_members", "Members of a consumer group", labels=["group"])
        generation = GaugeMetricFamily("logbroker_group_generation", "Current generation", labels=["group"])
        lag = GaugeMetricFamily("logbroker_group_lag", "High watermark minus committed offset",
                                labels=["group", "topic", "partition"])
        coordinator = self._groups()
        summaries = coordinator.list_groups() if coordinator is not None else []
        active = (s for s in summaries if s["members"])
        idle = (s for s in summaries if not s["members"])
        itemized = list(itertools.islice(itertools.chain(active, idle), GROUP_SERIES_MAX))
        for summary in itemized:
            members.add_metric([summary["group"]], summary["members"])
            generation.add_metric([summary["group"]], summary["generation"])
            for offset in coordinator.describe(summary["group"])["offsets"] if coordinator is not None else []:
                if offset["lag"] is not None:
                    lag.add_metric([summary["group"], offset["topic"], str(offset["partition"])], offset["lag"])
        count = GaugeMetricFamily("logbroker_groups", "Consumer groups this node coordinates")
        count.add_metric([], len(summaries))
        omitted = GaugeMetricFamily(
            "logbroker_group_series_omitted", f"Groups left out of the per-group series (at most {GROUP_SERIES_MAX})")
        omitted.add_metric([], len(summaries) - len(itemized))
        in_flight = GaugeMetricFamily("logbroker_queue_in_flight", "Messages leased and not yet settled",
                                      labels=["queue", "partition"])
        waiting = GaugeMetricFamily("logbroker_queue_not_yet_delivered", "Messages never delivered yet",
                                    labels=["queue", "partition"])
        for name in self._queues.names():
            for p in self._queues.describe(name)["partitions"]:
                in_flight.add_metric([name, str(p["partition"])], p["in_flight"])
                waiting.add_metric([name, str(p["partition"])], p["not_yet_delivered"])
        yield from (members, generation, lag, count, omitted, in_flight, waiting)
