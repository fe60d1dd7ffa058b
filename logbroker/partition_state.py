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
- a follower that stalls a waiting ``acks=all`` write (it lacks the write and has answered
  nothing for ``stall_ms``) leaves the ISR only while at least ``min_insync_replicas`` members
  remain: the ISR never shrinks under the minimum this way;
- a follower rejoins only once it holds everything below the high watermark and everything the
  current leader epoch wrote before it (it can serve as leader without losing an acknowledged
  record);
- leadership is handed back only to a follower that holds the whole log and has answered since
  the hand-over began (never to one that cannot take it up);
- truncation keeps exactly the prefix a follower shares with the leader, judged by leader epochs
  (no divergent suffix survives, no shared record is dropped).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Final

UNKNOWN = -1
MIN_INSYNC_KEY = "min_insync_replicas"


@dataclasses.dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower. ``log_end`` None: not known yet (the next shipment
    asks the follower where its log ends and truncates it to the shared prefix)."""

    log_end: int | None = None
    caught_up_ms: int = 0  # the last time the follower held everything the leader held
    high_watermark_sent: int = UNKNOWN
    answered_ms: int = 0  # the last time it answered a shipment with its log end


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


def stalling(isr: Sequence[int], leader_id: int, followers: Mapping[int, FollowerProgress],
             waiting: tuple[int, int] | None, now_ms: int, stall_ms: int, min_insync: int) -> list[int]:
    """The ISR followers to drop because they stall an ``acks=all`` write: ``waiting`` is
    ``(end, since_ms)`` of the oldest write waiting for the high watermark (None: none waits).

    A follower stalls it when its log end is below the write's end (or not known) and it has
    answered no shipment for ``stall_ms``, counted from the later of its last answer and the
    write's arrival: crashed, paused or cut off, not slow but answering (only the
    ``replica_lag_ms`` rule of ``out_of_sync`` judges that). The stalling followers are dropped
    only when at least ``min_insync`` members (the leader included) remain: otherwise dropping
    them would refuse the write rather than release it, and an ISR left smaller than needed
    would only narrow the next election; the slower rules apply then."""
    if waiting is None:
        return []
    end, since_ms = waiting
    if now_ms - since_ms < stall_ms:
        return []
    stalled = []
    for node in isr:
        progress = followers.get(node)
        if node == leader_id or (progress is not None and progress.log_end is not None and progress.log_end >= end):
            continue
        if progress is None or now_ms - max(progress.answered_ms, since_ms) >= stall_ms:
            stalled.append(node)
    return stalled if len(isr) - len(stalled) >= min_insync else []


def stall_due(isr: Sequence[int], leader_id: int, followers: Mapping[int, FollowerProgress],
              waiting: tuple[int, int] | None, now_ms: int, stall_ms: int) -> int | None:
    """The earliest time after ``now_ms`` at which ``stalling`` could first name a follower of
    ``isr`` for the write ``waiting``, so the upkeep can look then rather than a round later; None
    when no ISR follower lacks the write, or each one's time has passed (the minimum ISR kept it)."""
    if waiting is None:
        return None
    end, since_ms = waiting
    due = None
    for node in isr:
        progress = followers.get(node)
        if node == leader_id or (progress is not None and progress.log_end is not None and progress.log_end >= end):
            continue
        at = max(0 if progress is None else progress.answered_ms, since_ms) + stall_ms
        if at > now_ms and (due is None or at < due):
            due = at
    return due


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
    progress.answered_ms = max(progress.answered_ms, now_ms)
    if shipped_to >= leader_end_when_sent:
        progress.caught_up_ms = now_ms


def truncation_point(leader_epochs: Sequence[tuple[int, int]], leader_end: int,
                     follower_epochs: Sequence[tuple[int, int]], follower_end: int, committed: int = 0) -> int:
    """Where a follower must cut its log so that it keeps only what it shares with the leader.

    ``*_epochs`` are ``(epoch, start offset)`` in ascending order. Two replicas hold the same
    record at an offset exactly when they hold it from the same leader epoch (an epoch has one
    leader, which writes each offset once), so the shared prefix ends at the first offset whose
    epoch differs between the two histories, or where either log ends. Both histories are at
    hand, so this is exact in one step where Kafka's OffsetsForLeaderEpoch may need several round
    trips. Below the first start of either history (its retention) nothing is compared. A follower
    holding records without any epoch history keeps nothing (nothing can vouch for them).

    ``committed``: the follower's high watermark. What lies below it is committed, so the leader
    holds the same records (there is no unclean election), and the cut never goes below it,
    whatever the histories say: compaction moves a replica's epoch starts up (a batch whose first
    records it removed is rewritten with a later base offset, decision 0321), and replicas that
    compacted at different points then name different epochs at the same offsets."""
    limit = min(leader_end, follower_end)
    floor = min(committed, limit)
    if not follower_epochs:
        return floor if follower_end > 0 else limit
    starts = sorted({s for _, s in leader_epochs} | {s for _, s in follower_epochs} | {0})
    for start in starts:  # between two consecutive starts both histories name one epoch each
        if start >= limit:
            break
        ours, theirs = _epoch_at(leader_epochs, start), _epoch_at(follower_epochs, start)
        if ours is not None and theirs is not None and ours != theirs:
            return max(start, floor)
    return limit


def _epoch_at(epochs: Sequence[tuple[int, int]], offset: int) -> int | None:
    """The epoch that wrote ``offset`` by this history, None below its first start."""
    found = None
    for epoch, start in epochs:
        if start > offset:
            break
        found = epoch
    return found


def preferred_ready(replicas: Sequence[int], isr: Collection[int], leader_id: int, alive: Collection[int]) -> bool:
    """Failback may begin: the preferred replica (``replicas[0]``) is not the leader, is alive and
    in the ISR. (The hand-over itself then stops writes and waits until it holds the leader's
    whole log, so that nothing is lost, not even an ``acks=1`` record: under steady writes a
    follower is rarely level with its leader at any given instant.)"""
    if not replicas or replicas[0] == leader_id:
        return False
    return replicas[0] in isr and replicas[0] in alive


def answering(progress: FollowerProgress | None, now_ms: int, silent_ms: int) -> bool:
    """The follower has answered a shipment within ``silent_ms``: it runs and reaches us now,
    as a replica that is to take leadership over must (a paused or cut-off node would leave the
    partition without a leader until its lease lapsed)."""
    return progress is not None and now_ms - progress.answered_ms < silent_ms


HAND_OVER_READY: Final = "ready"
HAND_OVER_WAIT: Final = "wait"
HAND_OVER_ABANDON: Final = "abandon"


def hand_over(progress: FollowerProgress | None, leader_end: int, high_watermark_now: int, began_ms: int,
              now_ms: int, silent_ms: int, others: Sequence[FollowerProgress | None] = ()) -> str:
    """Where a hand-over of leadership to a follower stands (writes are refused meanwhile).

    ``ready`` once the follower holds the leader's whole log, the high watermark covers it, and
    it has answered since the hand-over began (a live round trip: a node paused since its last
    answer cannot give one, and leadership handed to it would stay unused until its lease
    lapsed); ``abandon`` when it, or one of ``others`` (the other ISR followers whose log end is
    below the leader's: the high watermark waits for them), has been silent for ``silent_ms``,
    counted from the later of its last answer and the hand-over's start (writes resume here; a
    later round tries again); else ``wait``."""
    if progress is None:
        return HAND_OVER_ABANDON
    if progress.answered_ms >= began_ms and progress.log_end is not None and progress.log_end >= leader_end \
            and high_watermark_now >= leader_end:
        return HAND_OVER_READY
    for follower in (progress, *others):
        if follower is None or now_ms - max(follower.answered_ms, began_ms) >= silent_ms:
            return HAND_OVER_ABANDON
    return HAND_OVER_WAIT


def may_begin_hand_over(members: Sequence[FollowerProgress | None], now_ms: int, fresh_ms: int,
                        waiting_since_ms: int | None = None, waiting_max_ms: int = 0) -> bool:
    """A hand-over may begin only when every ISR follower (the target among them) has answered a
    shipment within ``fresh_ms``: one already silent would hold the high watermark, and with it
    the hand-over, while writes are refused, until it is given up. Those that have not are asked
    for a round trip first (``answering`` decides the same for one follower).

    Nor while an ``acks=all`` write has waited longer than ``waiting_max_ms`` (``waiting_since_ms``:
    the oldest waiting write's arrival): a follower that stopped answering within ``fresh_ms``
    still looks fresh, and a hand-over begun then would refuse writes until it was given up, and
    count them as waiting from its start, so that the stall rule dropped the follower that much
    later; the stall rule deals with it first."""
    if waiting_since_ms is not None and now_ms - waiting_since_ms > waiting_max_ms:
        return False
    return all(answering(member, now_ms, fresh_ms) for member in members)


def failback_target(replicas: Sequence[int], isr: Collection[int], leader_id: int, alive: Collection[int],
                    ranks: Mapping[int, int] | None = None) -> int | None:
    """The replica leadership should be handed to, or None to keep it. ``ranks``: each node's
    rank under the topic's ``leader_racks`` (lower is better; absent nodes rank 0).

    First the racks: when a live in-sync replica ranks better than the leader, the best of them
    (ties: replica order). Else the preferred replica (``preferred_ready``), unless it ranks worse
    than the leader (it would be handed back at once). Without ranks this is ``preferred_ready``.
    The target is also the replica the election then picks (``partition_roles.candidate``): the
    best-ranked live in-sync replica, first in replica order."""
    rank = {} if ranks is None else ranks
    eligible = [node for node in replicas if node in isr and node in alive]
    if not eligible:
        return None
    best = min(eligible, key=lambda node: (rank.get(node, 0), replicas.index(node)))
    if rank.get(best, 0) < rank.get(leader_id, 0):
        return best
    if preferred_ready(replicas, isr, leader_id, alive) and rank.get(replicas[0], 0) <= rank.get(leader_id, 0):
        return replicas[0]
    return None


def min_insync_replicas(config: Mapping[str, object], replication_factor: int) -> int:
    """The topic's ``min_insync_replicas``, or the default: 1 for replication factor <= 2, else 2."""
    value = config.get(MIN_INSYNC_KEY)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return 1 if replication_factor <= 2 else 2


def rack_replica(isr: Collection[int], leader_id: int, racks: Mapping[int, str | None], client_rack: str | None,
                 this_node: int) -> int | None:
    """The in-sync replica a reader in ``client_rack`` should read from (Kafka's KIP-392): the
    leader when it is in that rack, else this node when it is, else the lowest id there; None when
    no in-sync replica is in that rack (or the reader names none): read from the leader. A replica
    serves up to its own high watermark, so what it answers was acknowledged under ``acks=all``."""
    if not client_rack:
        return None
    local = sorted(n for n in isr if racks.get(n) == client_rack)
    if not local:
        return None
    for preferred in (leader_id, this_node):
        if preferred in local:
            return preferred
    return local[0]
