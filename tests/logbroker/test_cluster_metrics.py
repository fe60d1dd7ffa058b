"""The counting rule behind the operator's gauges of led partitions (logbroker.cluster_metrics),
alone: partitions led here that miss replicas or fall under min.insync.replicas."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.cluster_metrics import LedPartitions, led_partitions

NODES = st.integers(min_value=1, max_value=7)


@st.composite
def leadership(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    replicas = tuple(draw(st.lists(NODES, min_size=1, max_size=5, unique=True)))
    isr = tuple(draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True)))
    return replicas, isr, draw(st.integers(min_value=1, max_value=len(replicas)))


def test_counts_of_the_partitions_a_node_leads():
    assert led_partitions([]) == LedPartitions(0, 0, 0)
    assert led_partitions([((1, 2, 3), (1, 2, 3), 2), ((1, 2, 3), (1, 2), 2), ((1, 2, 3), (1,), 2),
                           ((1,), (1,), 1)]) == LedPartitions(led=4, under_replicated=2, under_min_isr=1)


@given(st.lists(leadership(), max_size=20))
def test_under_replicated_counts_exactly_the_partitions_missing_a_replica(partitions):
    counted = led_partitions(partitions)
    assert counted.led == len(partitions)
    assert counted.under_replicated == sum(1 for replicas, isr, _ in partitions if set(isr) != set(replicas))
    assert counted.under_min_isr == sum(1 for _, isr, least in partitions if len(isr) < least)
    assert counted.under_min_isr <= counted.under_replicated <= counted.led  # min ISR is at most the replicas

