"""The replication rules of one partition, as pure functions (DESIGN §6): the high watermark,
when a follower leaves or rejoins the ISR, where a returning replica truncates, when the preferred
replica may take its leadership back, and ``min_insync_replicas``.

No I/O and no clock: times come in as arguments, so every rule is tested alone
(``tests/logbroker/test_partition_state.py``) and the I/O shell (``logbroker.replication``)
only gathers the inputs and applies the answers.

Invariants the rules keep:
- the high watermark is the least log end over the ISR *as committed in the coordinator*; a
  follower dropped from the ISR still counts until the coordinator has the smaller ISR, so the
  high watermark never passes a record some in-sync replica lacks;
- a follower rejoins only once it holds everything below the high watermark and everything the
  current leader epoch wrote before it (it can serve as leader without losing an acknowledged
  record);
- truncation keeps exactly the prefix a follower shares with the leader, judged by leader epochs
  (no divergent suffix survives, no shared record is dropped).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

UNKNOWN = -1
MIN_INSYNC_KEY = "min_insync_replicas"


@dataclasses.dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower. ``log_end`` None: not known yet (the next shipment
    asks the follower where its log ends and truncates it to the shared prefix)."""

    log_end: int | None = None
    caught_up_ms: int = 0  # the last time the follower held everything the leader held
    high_watermark_sent: int = UNKNOWN


def high_watermark(leader_id: int, leader_end: int, isr: Collection[int],
                   followers: Mapping[int, FollowerProgress]) -> int:
    """The least log end over the in-sync replicas (the leader's own included); a member whose
    log end is not known yet holds it where it is (returns ``UNKNOWN``: do not advance)."""
    low = leader_end
    for node in isr:
        if node == leader_id:
            continue
        progress = followers.get(node)
        if progress is None or progress.log_end is None:
            return UNKNOWN
        low = min(low, progress.log_end)
    return low


def out_of_sync(isr: Sequence[int], leader_id: int, followers: Mapping[int, FollowerProgress],
                alive: Collection[int], now_ms: int, lag_ms: int) -> list[int]:
    """The ISR members to drop: dead (their lease lapsed) or not caught up for ``lag_ms``."""
    return [node for node in isr if node != leader_id and (
        node not in alive or node not in followers or now_ms - followers[node].caught_up_ms > lag_ms)]


def ready_to_join(replicas: Sequence[int], isr: Collection[int], followers: Mapping[int, FollowerProgress],
                  alive: Collection[int], high_watermark_now: int, epoch_start: int) -> list[int]:
    """The replicas outside the ISR that may join it: alive, and holding everything below both
    the high watermark and the start of the current leader epoch."""
    need = max(high_watermark_now, epoch_start)
    joining = []
    for node in replicas:
        progress = followers.get(node)
        if node in isr or node not in alive or progress is None or progress.log_end is None:
            continue
        if progress.log_end >= need:
            joining.append(node)
    return joining


def caught_up(progress: FollowerProgress, shipped_to: int, leader_end_when_sent: int, now_ms: int) -> None:
    """Record a follower's answer: it now ends at ``shipped_to``; it is caught up if that reaches
    the leader's log end at the time the shipment left."""
    progress.log_end = shipped_to
    if shipped_to >= leader_end_when_sent:
        progress.caught_up_ms = now_ms


def truncation_point(leader_epochs: Sequence[tuple[int, int]], leader_end: int,
                     follower_epochs: Sequence[tuple[int, int]], follower_end: int) -> int:
    """Where a follower must cut its log so that it keeps only what it shares with the leader.

    ``*_epochs`` are ``(epoch, start offset)`` in ascending order. As Kafka's
    OffsetsForLeaderEpoch: take the follower's latest epoch, find the largest leader epoch not
    above it and where the leader's copy of that epoch ends; the follower keeps no more than that,
    nor more than its own copy of that epoch. A follower with no epochs (empty log) keeps its end;
    one whose epochs all predate the leader's history keeps nothing beyond the leader's first
    epoch start."""
    if not follower_epochs:
        return min(follower_end, leader_end)
    wanted = follower_epochs[-1][0]
    epoch, leader_stop = _end_for(leader_epochs, leader_end, wanted)
    if epoch == UNKNOWN:
        first = leader_epochs[0][1] if leader_epochs else leader_end
        return min(follower_end, first)
    _, follower_stop = _end_for(follower_epochs, follower_end, epoch)
    if follower_stop == UNKNOWN:
        follower_stop = follower_end
    return min(follower_end, leader_stop, follower_stop)


def _end_for(epochs: Sequence[tuple[int, int]], log_end: int, wanted: int) -> tuple[int, int]:
    """``(epoch, end offset)`` of the largest epoch <= ``wanted`` (the next epoch's start, or the
    log end for the latest); ``(UNKNOWN, UNKNOWN)`` when every epoch is newer."""
    for i in range(len(epochs) - 1, -1, -1):
        epoch, _ = epochs[i]
        if epoch <= wanted:
            return epoch, (log_end if i == len(epochs) - 1 else epochs[i + 1][1])
    return UNKNOWN, UNKNOWN


def preferred_ready(replicas: Sequence[int], isr: Collection[int], leader_id: int, alive: Collection[int]) -> bool:
    """Failback may begin: the preferred replica (``replicas[0]``) is not the leader, is alive and
    in the ISR. (The hand-over itself then stops writes and waits until it holds the leader's
    whole log, so that nothing is lost, not even an ``acks=1`` record: under steady writes a
    follower is rarely level with its leader at any given instant.)"""
    if not replicas or replicas[0] == leader_id:
        return False
    return replicas[0] in isr and replicas[0] in alive


def min_insync_replicas(config: Mapping[str, object], replication_factor: int) -> int:
    """The topic's ``min_insync_replicas``, or the default: 1 for replication factor <= 2, else 2."""
    value = config.get(MIN_INSYNC_KEY)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return 1 if replication_factor <= 2 else 2
