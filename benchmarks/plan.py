"""How much each scenario does: the standard run and the ``--quick`` run (every system alike)."""

from __future__ import annotations

import dataclasses

SIZES = (100, 1024)


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """The benches that compare one node's settings side by side (auth, encryption): repetitions,
    and the records produced in big and in small batches."""

    reps: int
    big_batch_records: int
    small_batch_records: int


BATCH_QUICK = BatchPlan(reps=3, big_batch_records=200_000, small_batch_records=20_000)
BATCH_FULL = BatchPlan(reps=5, big_batch_records=1_000_000, small_batch_records=100_000)


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    records: tuple[tuple[int, int], ...]          # (record bytes, records) for produce and consume
    latency_rates: tuple[int, ...]                # records/s
    latency_seconds: float                        # per (rate, size, repetition)
    idle_consumers: int
    idle_records: tuple[tuple[int, int], ...]     # produced with and without the idle consumers
    idle_window_s: float                          # server CPU is sampled this long with only idle consumers
    idle_memory_consumers: int                    # opened on a fresh server to measure their memory
    idle_memory_hold_s: float                     # held this long before RSS settles (a wait-and-repoll cycle)
    idle_memory_window_s: float                   # RSS counts as settled when steady this long
    queue_records: tuple[tuple[int, int], ...]
    publish_round_trips: int = 2000                # one-at-a-time publishes per size and repetition (latency)

    def count(self, table: tuple[tuple[int, int], ...], size: int) -> int:
        return dict(table)[size]


FULL = Plan(reps=3, records=((100, 500_000), (1024, 200_000)), latency_rates=(1000, 5000, 20_000),
            latency_seconds=5.0, idle_consumers=500, idle_records=((100, 200_000), (1024, 100_000)),
            idle_window_s=2.0, idle_memory_consumers=2000, idle_memory_hold_s=12.0,
            idle_memory_window_s=2.0, queue_records=((100, 50_000), (1024, 50_000)))
QUICK = Plan(reps=3, records=((100, 30_000), (1024, 10_000)), latency_rates=(1000, 5000, 20_000),
             latency_seconds=0.3, idle_consumers=50, idle_records=((100, 10_000), (1024, 5_000)),
             idle_window_s=0.5, idle_memory_consumers=200, idle_memory_hold_s=1.0,
             idle_memory_window_s=1.0, queue_records=((100, 3_000), (1024, 3_000)), publish_round_trips=300)
