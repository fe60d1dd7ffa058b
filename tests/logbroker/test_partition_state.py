"""The replication rules alone (``logbroker.partition_state``): high watermark, ISR shrink (dead,
lagging, or stalling a waiting ``acks=all`` write) and join, truncation by leader epochs (checked
against a model of divergent logs), failback, and ``min_insync_replicas``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.partition_state import (
    HAND_OVER_ABANDON,
    HAND_OVER_READY,
    HAND_OVER_WAIT,
    UNKNOWN,
    FollowerProgress,
    answering,
    caught_up,
    hand_over,
    high_watermark,
    may_begin_hand_over,
    min_insync_replicas,
    out_of_sync,
    preferred_ready,
    rack_replica,
    ready_to_join,
    stall_due,
    stalling,
    truncation_point,
)


def test_high_watermark_is_the_least_log_end_over_the_isr():
    followers = {2: FollowerProgress(log_end=7), 3: FollowerProgress(log_end=4)}
    assert high_watermark(1, 10, (1, 2, 3), followers) == 4
    assert high_watermark(1, 10, (1, 2), followers) == 7
    assert high_watermark(1, 3, (1, 2, 3), followers) == 3  # the leader's own end bounds it
    assert high_watermark(1, 10, (1,), followers) == 10


def test_an_isr_member_whose_end_is_unknown_holds_the_high_watermark():
    assert high_watermark(1, 10, (1, 2), {2: FollowerProgress()}) == UNKNOWN
    assert high_watermark(1, 10, (1, 2), {}) == UNKNOWN


def test_dead_or_lagging_followers_leave_the_isr_never_the_leader():
    followers = {2: FollowerProgress(log_end=5, caught_up_ms=1_000), 3: FollowerProgress(log_end=5, caught_up_ms=9_500)}
    assert out_of_sync((1, 2, 3), 1, followers, alive={1, 2, 3}, now_ms=10_000, lag_ms=5_000) == [2]
    assert out_of_sync((1, 2, 3), 1, followers, alive={1, 2}, now_ms=10_000, lag_ms=10_000) == [3]
    assert out_of_sync((1, 2, 3), 1, followers, alive={1, 2, 3}, now_ms=10_000, lag_ms=10_000) == []
    assert out_of_sync((1,), 1, {}, alive=set(), now_ms=10_000, lag_ms=1) == []


def test_a_silent_follower_lacking_a_waiting_write_leaves_once_it_waited_the_stall_time():
    followers = {2: FollowerProgress(log_end=10), 3: FollowerProgress(log_end=4, answered_ms=900)}
    waiting = (8, 1_000)  # a write ending at 8 waits since t=1000
    assert stalling((1, 2, 3), 1, followers, waiting, now_ms=1_499, stall_ms=500, min_insync=2) == []
    assert stalling((1, 2, 3), 1, followers, waiting, now_ms=1_500, stall_ms=500, min_insync=2) == [3]
    assert stalling((1, 2, 3), 1, followers, None, now_ms=9_999, stall_ms=500, min_insync=2) == []
    # a follower whose log end is not known (its shipment failed: crashed, refused) stalls it too
    unknown = {2: FollowerProgress(log_end=10), 3: FollowerProgress()}
    assert stalling((1, 2, 3), 1, unknown, waiting, now_ms=2_000, stall_ms=500, min_insync=2) == [3]
    assert stalling((1, 2, 3), 1, {2: FollowerProgress(log_end=10)}, waiting, 2_000, 500, 2) == [3]


def test_a_follower_that_is_slow_but_answering_stays():
    # it answered at 1400, after the write arrived: the stall time counts from its answer
    followers = {2: FollowerProgress(log_end=10), 3: FollowerProgress(log_end=6, answered_ms=1_400)}
    assert stalling((1, 2, 3), 1, followers, (8, 1_000), now_ms=1_899, stall_ms=500, min_insync=2) == []
    assert stalling((1, 2, 3), 1, followers, (8, 1_000), now_ms=1_900, stall_ms=500, min_insync=2) == [3]
    answered = FollowerProgress(log_end=0)
    caught_up(answered, 6, leader_end_when_sent=10, now_ms=1_400)
    assert answered.answered_ms == 1_400 and answered.caught_up_ms == 0


def test_a_stall_never_shrinks_the_isr_below_min_insync():
    both_behind = {2: FollowerProgress(log_end=4), 3: FollowerProgress(log_end=5)}
    # the leader cut off from both followers: dropping them would only refuse writes, not release them
    assert stalling((1, 2, 3), 1, both_behind, (8, 0), now_ms=9_000, stall_ms=500, min_insync=2) == []
    # replication factor 2, min_insync_replicas 2: the follower stays (writes wait, then the lease decides)
    assert stalling((1, 2), 1, both_behind, (8, 0), now_ms=9_000, stall_ms=500, min_insync=2) == []
    # ... and with min_insync_replicas 1 the leader alone may acknowledge, as the topic allows
    assert stalling((1, 2), 1, both_behind, (8, 0), now_ms=9_000, stall_ms=500, min_insync=1) == [2]
    # a silent follower leaves even while another, answering one still lacks the write
    mixed = {2: FollowerProgress(log_end=6, answered_ms=8_900), 3: FollowerProgress(log_end=4)}
    assert stalling((1, 2, 3), 1, mixed, (8, 0), now_ms=9_000, stall_ms=500, min_insync=2) == [3]
    # a follower already out of the ISR is no member to drop
    held = {2: FollowerProgress(log_end=10), 3: FollowerProgress(log_end=4)}
    assert stalling((1, 2), 1, held, (8, 0), now_ms=9_000, stall_ms=500, min_insync=2) == []


_progress = st.one_of(st.none(), st.builds(FollowerProgress, log_end=st.one_of(st.none(), st.integers(0, 20)),
                                           answered_ms=st.integers(0, 2_000)))


@given(isr_followers=st.sets(st.integers(2, 6), max_size=5),
       progress=st.dictionaries(st.integers(2, 6), _progress, max_size=5),
       end=st.integers(1, 20), since=st.integers(0, 1_000), now=st.integers(0, 2_000), stall=st.integers(1, 1_000),
       min_insync=st.integers(1, 6))
def test_a_stall_drops_only_silent_followers_lacking_the_write_and_keeps_min_insync(
        isr_followers: set[int], progress: dict[int, FollowerProgress | None], end: int, since: int, now: int,
        stall: int, min_insync: int):
    isr = (1, *sorted(isr_followers))
    followers = {n: p for n, p in progress.items() if p is not None}
    dropped = stalling(isr, 1, followers, (end, since), now, stall, min_insync)
    assert 1 not in dropped and set(dropped) <= set(isr) and len(set(dropped)) == len(dropped)
    if not dropped:
        return
    assert now - since >= stall and len(isr) - len(dropped) >= min_insync
    for node in dropped:
        p = followers.get(node)
        assert p is None or p.log_end is None or p.log_end < end, "a follower holding the write was dropped"
        assert p is None or now - max(p.answered_ms, since) >= stall, "an answering follower was dropped"
    # the members left, with the leader's end, would release the write once each holds it
    kept = {n: FollowerProgress(log_end=end) for n in isr if n not in dropped and n != 1}
    assert high_watermark(1, end, tuple(n for n in isr if n not in dropped), kept) >= end


def test_a_follower_joins_once_it_holds_the_high_watermark_and_the_epoch_start():
    followers = {2: FollowerProgress(log_end=8), 3: FollowerProgress(log_end=5), 4: FollowerProgress()}
    assert ready_to_join((1, 2, 3, 4), (1,), followers, {1, 2, 3, 4}, high_watermark_now=6, epoch_start=0) == [2]
    assert ready_to_join((1, 2, 3, 4), (1,), followers, {1, 2, 3, 4}, high_watermark_now=5, epoch_start=9) == []
    assert ready_to_join((1, 2, 3), (1,), followers, {1, 3}, high_watermark_now=0, epoch_start=0) == [3]
    assert ready_to_join((1, 2), (1, 2), followers, {1, 2}, high_watermark_now=0, epoch_start=0) == []


def test_caught_up_needs_the_leaders_end_at_send_time():
    progress = FollowerProgress(log_end=0, caught_up_ms=5)
    caught_up(progress, 8, leader_end_when_sent=10, now_ms=100)
    assert (progress.log_end, progress.caught_up_ms) == (8, 5)
    caught_up(progress, 10, leader_end_when_sent=10, now_ms=200)
    assert (progress.log_end, progress.caught_up_ms) == (10, 200)


def test_truncation_examples():
    # Same history: keep everything shared.
    assert truncation_point([(0, 0), (1, 5)], 9, [(0, 0), (1, 5)], 7) == 7
    # The follower led epoch 1 and wrote past what the new leader (epoch 2) kept of epoch 1.
    assert truncation_point([(0, 0), (1, 5), (2, 8)], 12, [(0, 0), (1, 5)], 11) == 8
    # The follower's latest epoch is unknown to the leader: cut at the end of the leader's epoch 0.
    assert truncation_point([(0, 0), (2, 6)], 9, [(0, 0), (1, 4)], 8) == 4
    # An empty follower keeps nothing; a follower with no epoch the leader knows keeps nothing past the leader's start.
    assert truncation_point([(0, 0)], 5, [], 0) == 0
    assert truncation_point([(3, 10)], 15, [(1, 0)], 8) == 8
    assert truncation_point([(3, 10)], 15, [(1, 0)], 12) == 10
    # Several quick failovers: the follower's epochs 2 and 4 never reached the leader.
    assert truncation_point([(1, 0), (3, 5), (5, 10)], 20, [(1, 0), (2, 3), (4, 8)], 12) == 3
    assert truncation_point([(1, 0), (5, 100)], 200, [(3, 50)], 120) == 50
    # Records without any epoch history are not kept.
    assert truncation_point([(1, 0)], 10, [], 4) == 0


def test_the_cut_never_goes_below_the_followers_high_watermark():
    # Compaction on the leader rewrote epoch 1's first batch from offset 100 up to 104 before the
    # follower copied it: the follower's history starts epoch 1 at 104. Offsets 100-103 are in a
    # gap on the follower, not divergent; what is below its high watermark is committed.
    assert truncation_point([(0, 0), (1, 100)], 200, [(0, 0), (1, 104)], 160) == 100
    assert truncation_point([(0, 0), (1, 100)], 200, [(0, 0), (1, 104)], 160, committed=150) == 150
    # A real divergence above the high watermark is still cut where it begins.
    assert truncation_point([(0, 0), (1, 5), (2, 8)], 12, [(0, 0), (1, 5)], 11, committed=6) == 8
    # The floor is never past either log's end.
    assert truncation_point([(0, 0), (1, 100)], 120, [(0, 0), (1, 104)], 160, committed=150) == 120
    assert truncation_point([(1, 0)], 10, [], 4, committed=3) == 3


def _log(epochs_and_lengths: list[tuple[int, int]]) -> tuple[list[int], list[tuple[int, int]]]:
    """A log as the epoch of each offset, and its epoch history."""
    offsets: list[int] = []
    history: list[tuple[int, int]] = []
    for epoch, length in epochs_and_lengths:
        if length and (not history or history[-1][0] != epoch):
            history.append((epoch, len(offsets)))
        offsets.extend([epoch] * length)
    return offsets, history


@st.composite
def diverged_logs(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """A leader's and a follower's log: a shared prefix, then each its own suffix, with the
    leader's suffix in epochs after every epoch of the follower's (as an election makes them)."""
    shared = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=3))
    shared = sorted(shared)
    top = max((e for e, _ in shared), default=0)
    # Later epochs each had one leader, so each went to one of the two logs only, in any interleaving
    # (a chain of failovers in which the two never synced).
    owners = draw(st.lists(st.tuples(st.booleans(), st.integers(1, 4)), max_size=5))
    leader_tail = [(top + 1 + i, n) for i, (to_leader, n) in enumerate(owners) if to_leader]
    follower_tail = [(top + 1 + i, n) for i, (to_leader, n) in enumerate(owners) if not to_leader]
    if shared and draw(st.booleans()):  # the follower went on writing the last shared epoch (it led it)
        follower_tail.insert(0, (top, draw(st.integers(1, 4))))
    return _log(shared + leader_tail)[0], _log(shared + follower_tail)[0]


@settings(max_examples=300, deadline=None)
@given(diverged_logs())
def test_truncation_keeps_exactly_the_shared_prefix(logs: tuple[list[int], list[int]]):
    leader, follower = logs
    shared = 0
    while shared < min(len(leader), len(follower)) and leader[shared] == follower[shared]:
        shared += 1
    leader_history = _history(leader)
    follower_history = _history(follower)
    cut = truncation_point(leader_history, len(leader), follower_history, len(follower))
    assert cut == shared


def _history(offsets: list[int]) -> list[tuple[int, int]]:
    history: list[tuple[int, int]] = []
    for offset, epoch in enumerate(offsets):
        if not history or history[-1][0] != epoch:
            history.append((epoch, offset))
    return history


def test_failback_begins_once_the_preferred_replica_is_alive_and_in_sync():
    assert preferred_ready((1, 2), (1, 2), 2, {1, 2})
    assert not preferred_ready((1, 2), (2,), 2, {1, 2})  # not in the ISR yet
    assert not preferred_ready((1, 2), (1, 2), 2, {2})  # not alive
    assert not preferred_ready((2, 1), (1, 2), 2, {1, 2})  # already the preferred
    assert not preferred_ready((), (), 2, {2})


def test_a_failback_begins_only_towards_a_follower_that_answered_just_now():
    assert answering(FollowerProgress(log_end=5, answered_ms=1_000), 1_400, 500)
    assert not answering(FollowerProgress(log_end=5, answered_ms=1_000), 1_500, 500)  # paused or idle: ask first
    assert not answering(None, 1_000, 500)


def test_a_hand_over_completes_only_after_a_round_trip_that_began_with_it():
    level = FollowerProgress(log_end=10, answered_ms=990)
    assert hand_over(level, 10, 10, 1_000, 1_005, 500) == HAND_OVER_WAIT  # level, but its answer predates it
    level.answered_ms = 1_020
    assert hand_over(level, 10, 10, 1_000, 1_030, 500) == HAND_OVER_READY
    assert hand_over(level, 10, 9, 1_000, 1_030, 500) == HAND_OVER_WAIT  # the high watermark lags
    behind = FollowerProgress(log_end=8, answered_ms=1_020)
    assert hand_over(behind, 10, 10, 1_000, 1_400, 500) == HAND_OVER_WAIT  # catching up, answering
    assert hand_over(behind, 10, 10, 1_000, 1_520, 500) == HAND_OVER_ABANDON  # silent since its last answer
    assert hand_over(FollowerProgress(log_end=10, answered_ms=900), 10, 10, 1_000, 1_499, 500) == HAND_OVER_WAIT
    assert hand_over(FollowerProgress(log_end=10, answered_ms=900), 10, 10, 1_000, 1_500, 500) == HAND_OVER_ABANDON
    assert hand_over(None, 10, 10, 1_000, 1_000, 500) == HAND_OVER_ABANDON


def test_a_hand_over_is_given_up_when_another_member_the_high_watermark_waits_for_is_silent():
    target = FollowerProgress(log_end=10, answered_ms=1_020)
    paused = FollowerProgress(log_end=8, answered_ms=950)  # lacks the tail: the high watermark waits for it
    assert hand_over(target, 10, 8, 1_000, 1_400, 500, [paused]) == HAND_OVER_WAIT
    assert hand_over(target, 10, 8, 1_000, 1_500, 500, [paused]) == HAND_OVER_ABANDON, \
        "silent for 500 ms since the hand-over began: it holds the high watermark, and the refused writes"
    assert hand_over(target, 10, 8, 1_000, 1_010, 500, [None]) == HAND_OVER_ABANDON, "a member never heard from"
    target.answered_ms = 1_590
    answering_member = FollowerProgress(log_end=9, answered_ms=1_480)
    assert hand_over(target, 10, 8, 1_000, 1_600, 500, [answering_member]) == HAND_OVER_WAIT
    target.answered_ms = 1_620
    assert hand_over(target, 10, 10, 1_000, 1_630, 500, [paused]) == HAND_OVER_READY, \
        "ready wins: the high watermark covers the log whoever was silent"


def test_a_hand_over_begins_only_when_every_isr_follower_answered_just_now():
    fresh = FollowerProgress(log_end=10, answered_ms=1_900)
    paused = FollowerProgress(log_end=10, answered_ms=1_650)  # paused 350 ms ago: the target answers, it does not
    assert may_begin_hand_over([fresh, fresh], 2_000, 300)
    assert not may_begin_hand_over([fresh, paused], 2_000, 300)
    assert not may_begin_hand_over([fresh, None], 2_000, 300)
    assert may_begin_hand_over([], 2_000, 300), "no follower in the ISR: nothing to wait for"


def test_no_hand_over_begins_while_a_write_has_waited_longer_than_a_healthy_round_trip():
    """A follower paused 250 ms ago still looks fresh (300 ms); the write waiting since it paused
    says otherwise: the stall rule drops it first, then a later round hands over."""
    looks_fresh = FollowerProgress(log_end=9, answered_ms=1_750)
    fresh = FollowerProgress(log_end=10, answered_ms=1_990)
    assert not may_begin_hand_over([fresh, looks_fresh], 2_000, 300, waiting_since_ms=1_760, waiting_max_ms=100)
    assert may_begin_hand_over([fresh, looks_fresh], 2_000, 300, waiting_since_ms=1_950, waiting_max_ms=100), \
        "a write in flight for a healthy round trip does not hold a failback back"
    assert may_begin_hand_over([fresh, fresh], 2_000, 300, waiting_since_ms=None, waiting_max_ms=100)


@given(log_end=st.one_of(st.none(), st.integers(0, 20)), answered=st.integers(0, 3_000),
       leader_end=st.integers(0, 20), high_watermark_now=st.integers(0, 20), now=st.integers(1_000, 3_000))
def test_a_hand_over_is_ready_only_to_a_level_follower_that_answered_since_it_began(
        log_end: int | None, answered: int, leader_end: int, high_watermark_now: int, now: int) -> None:
    progress = FollowerProgress(log_end=log_end, answered_ms=answered)
    stands = hand_over(progress, leader_end, high_watermark_now, 1_000, now, 500)
    if stands == HAND_OVER_READY:
        assert answered >= 1_000 and log_end is not None and log_end >= leader_end <= high_watermark_now
    if stands == HAND_OVER_ABANDON:
        assert now - max(answered, 1_000) >= 500
    if stands == HAND_OVER_WAIT:
        assert now - max(answered, 1_000) < 500


def test_min_insync_replicas_defaults_and_config():
    assert [min_insync_replicas({}, rf) for rf in (1, 2, 3, 5)] == [1, 1, 2, 2]
    assert min_insync_replicas({"min_insync_replicas": 3}, 3) == 3


# ---- rack_replica -------------------------------------------------------------------------------

def test_a_reader_is_served_in_its_rack_by_the_leader_first_then_this_node_then_the_lowest_id():
    racks = {1: "a", 2: "b", 3: "b", 4: "b", 5: None}
    assert rack_replica([1, 2, 3], 1, racks, "a", 2) == 1
    assert rack_replica([1, 2, 3, 4], 1, racks, "b", 3) == 3
    assert rack_replica([1, 2, 3, 4], 1, racks, "b", 1) == 2
    assert rack_replica([1, 3, 4], 3, racks, "b", 4) == 3
    assert rack_replica([1, 5], 1, racks, "b", 1) is None  # no in-sync replica there: the leader
    assert rack_replica([1, 2], 1, racks, None, 2) is None and rack_replica([1, 2], 1, racks, "", 2) is None
    assert rack_replica([1], 1, {}, "b", 2) is None


@given(isr=st.sets(st.integers(1, 6), min_size=1, max_size=6), leader=st.integers(1, 6), me=st.integers(1, 6),
       racks=st.dictionaries(st.integers(1, 6), st.sampled_from(["a", "b", "c"]) | st.none()),
       rack=st.sampled_from(["a", "b", "c"]))
def test_a_rack_read_goes_only_to_an_in_sync_replica_of_that_rack(isr, leader, me, racks, rack):
    chosen = rack_replica(isr, leader, racks, rack, me)
    local = {n for n in isr if racks.get(n) == rack}
    if chosen is None:
        assert not local
    else:
        assert chosen in local
        assert chosen == leader if leader in local else chosen == me if me in local else chosen == min(local)


def test_the_stall_rule_is_looked_at_when_a_silent_followers_time_is_up():
    followers = {2: FollowerProgress(log_end=5, answered_ms=1_100),
                 3: FollowerProgress(log_end=10, answered_ms=1_300)}
    waiting = (10, 1_000)  # node 2 lacks the write; node 3 holds it
    assert stall_due((1, 2, 3), 1, followers, waiting, 1_200, 500) == 1_600, "its last answer + 500"
    assert stall_due((1, 2, 3), 1, followers, (10, 1_400), 1_450, 500) == 1_900, "the write came after its answer"
    assert stall_due((1, 2, 3), 1, followers, waiting, 1_600, 500) is None, "passed: the round judges it now"
    assert stall_due((1, 2, 3), 1, followers, None, 1_200, 500) is None, "nothing waits"
    assert stall_due((1, 3), 1, followers, waiting, 1_200, 500) is None, "every ISR follower holds it"
    assert stall_due((1, 2, 4), 1, followers, waiting, 1_200, 500) == 1_500, "one never heard from: from the write"


@given(answered=st.lists(st.integers(0, 3_000), min_size=1, max_size=4),
       log_ends=st.lists(st.integers(0, 20), min_size=4, max_size=4), end=st.integers(1, 20),
       since=st.integers(0, 3_000), now=st.integers(0, 4_000))
def test_no_follower_stalls_before_its_due_time_and_one_does_at_it(
        answered: list[int], log_ends: list[int], end: int, since: int, now: int) -> None:
    followers = {n + 2: FollowerProgress(log_end=log_ends[n], answered_ms=a) for n, a in enumerate(answered)}
    isr = (1, *followers)
    due = stall_due(isr, 1, followers, (end, since), now, 500)
    if due is None:
        return
    assert due > now
    already = set(stalling(isr, 1, followers, (end, since), now, 500, 1))
    assert set(stalling(isr, 1, followers, (end, since), due - 1, 500, 1)) == already, "nobody new before it"
    assert set(stalling(isr, 1, followers, (end, since), due, 500, 1)) > already, "the due one stalls at its time"
