"""The follower's side of a shipment (DESIGN §6): apply what a leader sent, partition by partition.

A shipment entry is one of two kinds:
- ``align``: the leader's epoch history and log bounds; the follower cuts its log to the prefix it
  shares with the leader (``partition_state.truncation_point``), or restarts it empty at the
  leader's log start when it is behind the leader's retention, and answers its log end;
- data: whole batches as the leader stored them, starting at ``start``, which must be the
  follower's log end (else it answers its log end with ``non_sequential_append`` and the
  leader aligns it again).

Every entry carries the leader's epoch: one older than the newest this node knows for the
partition (from the coordinator or from an earlier shipment) is refused with ``stale_leader_epoch``,
so a deposed leader's shipments never land. A node that still leads the partition at an older
epoch gives the leadership up first (``on_newer_leader``). Every entry carries the leader's high
watermark too: the follower exposes records up to it, never past its own log end.

Answers are per entry (a ``ShipmentResult``: the log end, or a code of ``ReplicationCode``), in
request order; entries and answers are the typed messages of ``internal_rpc.messages``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from internal_rpc.messages import ShipmentEntry, ShipmentResult
from logbroker.partition_state import truncation_point
from logbroker.replica_manager import Replica
from segments.errors import InvalidBatchError, NonSequentialAppendError, StaleLeaderEpochError

log = logging.getLogger(__name__)


class FollowerSide:
    """Applies shipments to this node's replicas.

    ``replica_of(topic, partition, topic_id)`` returns the open replica or None;
    ``known_epoch(topic, partition, topic_id)`` the newest epoch the coordinator's cache shows for
    that topic (-1 when it shows another of that name); ``led_epoch(topic, partition)`` the epoch
    this node leads at, or None; ``on_newer_leader(topic, partition, epoch)`` ends this node's own
    leadership of an older epoch."""

    def __init__(self, replica_of: Callable[[str, int, str], Replica | None],
                 known_epoch: Callable[[str, int, str], int], led_epoch: Callable[[str, int], int | None],
                 on_newer_leader: Callable[[str, int, int], None]) -> None:
        self._replica_of = replica_of
        self._known_epoch = known_epoch
        self._led_epoch = led_epoch
        self._on_newer_leader = on_newer_leader
        # The newest epoch a shipment came from, by (topic, topic id, partition): a topic deleted and
        # created again under its name starts its epochs afresh.
        self._seen: dict[tuple[str, str, int], int] = {}

    def forget(self, topic: str, partition: int | None = None) -> None:
        """Forget the epochs seen for ``topic`` (one partition, or all): this node leads it now,
        or the topic left this node."""
        for key in [k for k in self._seen if k[0] == topic and (partition is None or k[2] == partition)]:
            del self._seen[key]

    def apply(self, entry: ShipmentEntry) -> tuple[ShipmentResult, Replica | None]:
        """Apply one entry; the answer and the replica written to (for the durability wait)."""
        key = (entry.topic, entry.partition)
        seen_key = (entry.topic, entry.topic_id, entry.partition)
        known = max(self._known_epoch(entry.topic, entry.partition, entry.topic_id), self._seen.get(seen_key, -1))
        if entry.epoch < known:
            return ShipmentResult(error="stale_leader_epoch", epoch=known), None
        led = self._led_epoch(*key)
        if led is not None:
            if led >= entry.epoch:
                return ShipmentResult(error="stale_leader_epoch", epoch=led), None
            self._on_newer_leader(entry.topic, entry.partition, entry.epoch)
        replica = self._replica_of(entry.topic, entry.partition, entry.topic_id)
        if replica is None:
            return ShipmentResult(error="unknown_partition"), None
        self._seen[seen_key] = entry.epoch
        partition_log = replica.log
        if entry.align:
            self._align(replica, entry)
        elif entry.start != partition_log.log_end_offset:
            return ShipmentResult(error="non_sequential_append", log_end=partition_log.log_end_offset), None
        elif entry.data:
            try:
                replica.append_copied(entry.data)
            except (InvalidBatchError, NonSequentialAppendError, StaleLeaderEpochError) as exc:
                # A torn or foreign batch: keep what landed, ask again from there.
                log.warning("shipment refused", extra={"fields": {"topic": entry.topic, "partition": entry.partition,
                                                                   "error": str(exc)}})
                return ShipmentResult(error="non_sequential_append", log_end=partition_log.log_end_offset), replica
        replica.advance(min(entry.high_watermark, partition_log.log_end_offset))
        return ShipmentResult(log_end=partition_log.log_end_offset), replica

    @staticmethod
    def _align(replica: Replica, entry: ShipmentEntry) -> None:
        partition_log = replica.log
        end = partition_log.log_end_offset
        if end == partition_log.log_start_offset and entry.leader_start <= end <= entry.leader_end:
            return  # empty: nothing to cut, and the leader has this offset
        if end < entry.leader_start or partition_log.log_start_offset > entry.leader_end:
            replica.truncate(entry.leader_start, restart=True)
            log.info("replica restarted at its leader's log start", extra={"fields": {
                "topic": entry.topic, "partition": entry.partition, "offset": entry.leader_start}})
            return
        cut = truncation_point(entry.leader_epochs, entry.leader_end, partition_log.epoch_entries(), end,
                               replica.high_watermark)
        if cut < end:
            replica.truncate(cut)
            log.warning("divergent suffix truncated", extra={"fields": {
                "topic": entry.topic, "partition": entry.partition, "from": end, "to": partition_log.log_end_offset}})
