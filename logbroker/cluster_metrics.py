"""The gauges and counters an operator pages on: partitions this node leads that miss replicas,
partitions no node leads, ISR shrinks and expands, leadership changes, the coordinator session,
and the free space of the data directory.

Nothing here is on the request path: the counters are integers the replication loop and the
reconciler already touch when a change happens, and the rest is read when ``/metrics`` is
scraped (one pass over the leaderships, dictionary lookups over the cached partitions, one
``statvfs``). The counting rule over the leaderships is a pure function, tested alone.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from logbroker.storage_health import free_bytes, total_bytes

if TYPE_CHECKING:
    from coordinator.base import Coordinator
    from logbroker.ports import LocalReplicas
    from logbroker.reconciler import Reconciler
    from logbroker.replication.manager import ReplicationManager


@dataclasses.dataclass(frozen=True, slots=True)
class LedPartitions:
    """What the partitions one node leads look like: ``under_replicated`` have an ISR smaller than
    their replica set, ``under_min_isr`` one smaller than ``min.insync.replicas`` (acks=all
    writes to them are refused)."""

    led: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0


def led_partitions(leaderships: Iterable[tuple[Sequence[int], Sequence[int], int]]) -> LedPartitions:
    """Count over ``(replicas, isr, min_insync)`` of each partition led here."""
    led = under = below_min = 0
    for replicas, isr, min_insync in leaderships:
        led += 1
        in_sync = len(set(isr))
        under += in_sync < len(set(replicas))
        below_min += in_sync < min_insync
    return LedPartitions(led, under, below_min)


class ClusterHealthCollector(Collector):
    """Reads the node's coordinator, replicas, replication and reconciler, and the data
    directory's filesystem, when scraped."""

    def __init__(self, coordinator: Coordinator, replicas: LocalReplicas, replication: ReplicationManager,
                 reconciler: Reconciler, data_dir: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._coordinator = coordinator
        self._replicas = replicas
        self._replication = replication
        self._reconciler = reconciler
        self._data_dir = data_dir
        self._clock = clock

    def _offline(self) -> int:
        if not self._coordinator.is_cluster:
            return sum(1 for replica in self._replicas.all() if replica.log.offline_reason is not None)
        return self._coordinator.cached_leaderless_partitions()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        replication = self._replication
        led = led_partitions((lead.replicas, lead.isr, lead.min_insync)
                             for lead in list(replication.leaderships.values()) if not lead.closed)
        yield _gauge("logbroker_leader_partitions", "Partitions this node leads", led.led)
        yield _gauge("logbroker_under_replicated_partitions",
                     "Partitions this node leads whose in-sync replicas are fewer than their replicas",
                     led.under_replicated)
        yield _gauge("logbroker_under_min_isr_partitions",
                     "Partitions this node leads with fewer in-sync replicas than min.insync.replicas "
                     "(acks=all writes to them are refused)", led.under_min_isr)
        yield _gauge("logbroker_offline_partitions",
                     "Partitions no node can serve: without a leader in the cluster's metadata as this node "
                     "holds it (a single node: whose log is offline)", self._offline())
        yield _counter("logbroker_isr_shrinks", "Changes of a led partition's ISR that dropped replicas",
                       replication.isr_shrinks)
        yield _counter("logbroker_isr_expands", "Changes of a led partition's ISR that added replicas",
                       replication.isr_expands)
        changes = CounterMetricFamily("logbroker_leadership_changes",
                                      "Leaderships this node took up (started) or gave up (ended)", labels=["change"])
        changes.add_metric(["started"], replication.leaderships_started)
        changes.add_metric(["ended"], replication.leaderships_ended)
        yield changes
        shipped = sorted(replication.shipped.items())
        for name, field, text in (
                ("logbroker_replication_calls", "calls", "Replicate calls to a follower node answered"),
                ("logbroker_replication_entries", "entries", "Partition entries in the Replicate calls answered"),
                ("logbroker_replication_bytes", "bytes", "Bytes of record batches in the Replicate calls answered")):
            family = CounterMetricFamily(name, text, labels=["follower"])
            for follower, counts in shipped:
                family.add_metric([str(follower)], getattr(counts, field))
            yield family
        coordinator = self._coordinator
        yield _gauge("logbroker_coordinator_session_up",
                     "1 while this node's coordinator session (its etcd lease) is live; a single node: always 1",
                     1 if coordinator.session_alive() else 0)
        yield _counter("logbroker_coordinator_session_losses",
                       "Times this node's coordinator session was lost (its leaderships went with it)",
                       self._reconciler.session_losses)
        if coordinator.is_cluster:
            yield _gauge("logbroker_coordinator_lease_remaining_seconds",
                         "Seconds this node can still prove its leaderships without a further keepalive",
                         max(0.0, coordinator.lease_valid_until() - self._clock()))
        free, total = free_bytes(self._data_dir), total_bytes(self._data_dir)
        if free is not None and total is not None:
            yield _gauge("logbroker_disk_free_bytes", "Bytes available to the node on its data directory's "
                         "filesystem", free)
            yield _gauge("logbroker_disk_total_bytes", "Size of the data directory's filesystem", total)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation)
    family.add_metric([], value)
    return family


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation)
    family.add_metric([], value)
    return family
