"""Prometheus gauges of consumer groups and queues, read from their state at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from logbroker.groups.coordinator import GroupCoordinator
from logbroker.queues.manager import QueueManager


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
        for summary in coordinator.list_groups() if coordinator is not None else []:
            members.add_metric([summary["group"]], summary["members"])
            generation.add_metric([summary["group"]], summary["generation"])
            for offset in coordinator.describe(summary["group"])["offsets"] if coordinator is not None else []:
                if offset["lag"] is not None:
                    lag.add_metric([summary["group"], offset["topic"], str(offset["partition"])], offset["lag"])
        in_flight = GaugeMetricFamily("logbroker_queue_in_flight", "Messages leased and not yet settled",
                                      labels=["queue", "partition"])
        waiting = GaugeMetricFamily("logbroker_queue_not_yet_delivered", "Messages never delivered yet",
                                    labels=["queue", "partition"])
        for name in self._queues.names():
            for p in self._queues.describe(name)["partitions"]:
                in_flight.add_metric([name, str(p["partition"])], p["in_flight"])
                waiting.add_metric([name, str(p["partition"])], p["not_yet_delivered"])
        yield from (members, generation, lag, in_flight, waiting)
