"""The idempotent identity of each batch the sink writes, derived from what a re-run repeats (pure).

A streaming micro-batch that is written again (its task retried, or the whole batch re-run after
the driver restarts from its checkpoint) must store nothing twice. Each batch carries a producer
identity (``producer_id``, ``producer_epoch``, ``base_sequence``), which the broker de-duplicates
within the topic's ``dedup_window_ms`` (``logbroker.dedup``), built from values the re-run repeats:

- ``producer_id``: the writer's tag (the broker accepts only the caller's, ``logbroker.producer_ids``)
  and a 31-bit serial: 16 bits of a hash of the write's scope (the streaming query's id with the
  batch id's run of ``EPOCHS``, or for a batch write a random scope the driver picks once) and the
  Spark task's partition id (15 bits:
  at most ``TASKS_MAX`` tasks, so two tasks of one write never share an id);
- ``producer_epoch``: the micro-batch id modulo ``EPOCHS`` (never the broker's key epoch);
- ``base_sequence``: the records this task sent to that topic partition earlier in this batch.

So a re-run that sees the same rows in the same order (a deterministic query, as Spark's own
exactly-once sinks require) rebuilds the same batches with the same identities, and the broker
answers each from its first write. Two different writes collide only when their scopes share 16
hash bits and their batch ids agree modulo ``EPOCHS`` within the window.
"""

from __future__ import annotations

import hashlib
from typing import Final

SERIAL_BITS: Final = 31
TASK_BITS: Final = 15
TASKS_MAX: Final = 1 << TASK_BITS
EPOCHS: Final = 32_767  # epochs 0..32766: the broker keeps 32767 for Idempotency-Key writes
SCOPE_BITS: Final = SERIAL_BITS - TASK_BITS


def scope_hash(scope: str) -> int:
    return int.from_bytes(hashlib.blake2b(scope.encode(), digest_size=4, person=b"lb.spark-sink").digest(),
                          "big") >> (32 - SCOPE_BITS)


def producer_id(writer_tag: int, scope: str, task: int) -> int:
    """The id of task ``task``'s batches in write ``scope`` (``ValueError`` past ``TASKS_MAX`` tasks)."""
    if not 0 <= task < TASKS_MAX:
        raise ValueError(f"an exactly-once write has at most {TASKS_MAX} tasks; task {task} is past it "
                         "(repartition to fewer, or write with exactlyOnce=false)")
    return (writer_tag << SERIAL_BITS) | (scope_hash(scope) << TASK_BITS) | task


def producer_epoch(batch_id: int) -> int:
    return batch_id % EPOCHS


def streaming_scope(query_id: str, batch_id: int) -> str:
    """A streaming write's scope: the query id and which run of ``EPOCHS`` batch ids the batch is
    in, so batch N and batch N + EPOCHS (whose epochs agree) never share an identity."""
    return f"{query_id}/{batch_id // EPOCHS}"
