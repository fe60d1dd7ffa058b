"""The queue share state: unit cases and a Hypothesis state machine against a simple model."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from logbroker.queues.share_state import (
    DEAD,
    LEASED,
    PartitionShare,
    ack_event,
    dead_event,
    lease_event,
    nack_event,
    withdraw_event,
)


def test_lease_ack_and_redelivery_after_timeout():
    share = PartitionShare(max_deliveries=3)
    assert share.acquire(0, 2, 100, high_watermark=5, token=7) == [0, 1]
    assert share.acquire(50, 10, 100, high_watermark=5, token=8) == [2, 3, 4]
    assert share.ack(0, 7, now_ms=60) and not share.ack(0, 7, now_ms=60), "a receipt acks once"
    assert not share.ack(1, 8, now_ms=60), "another lease's token"
    assert share.acquire(99, 10, 100, high_watermark=5, token=9) == []
    assert share.acquire(100, 10, 100, high_watermark=5, token=9) == [1]
    assert share.entries[1].count == 2 and share.done_below == 1


def test_nack_with_delay_then_dead_letter_at_max_deliveries():
    share = PartitionShare(max_deliveries=2)
    assert share.acquire(0, 1, 1000, 1, token=1) == [0]
    assert share.nack(0, 1, now_ms=0, delay_ms=50)
    assert not share.nack(0, 1, now_ms=0, delay_ms=0), "the receipt is spent"
    assert share.acquire(49, 1, 1000, 1, token=2) == []
    assert share.acquire(50, 1, 1000, 1, token=2) == [0]
    assert share.nack(0, 2, now_ms=60, delay_ms=0)
    assert share.entries[0].state == DEAD
    assert share.take_dead() == [0]
    assert share.acquire(100, 1, 1000, 1, token=3) == []
    share.dead_lettered(0)
    assert share.done_below == 1 and not share.entries


def test_window_caps_new_messages():
    share = PartitionShare(max_deliveries=5, window_max=3)
    assert share.acquire(0, 10, 100, 10, token=1) == [0, 1, 2]
    assert share.acquire(0, 10, 100, 10, token=2) == []
    assert share.ack(0, 1, now_ms=0)
    assert share.acquire(0, 10, 100, 10, token=3) == [3]


def test_a_receipt_whose_lease_ran_out_settles_nothing_even_before_anyone_else_received_it():
    share = PartitionShare(max_deliveries=5)
    assert share.acquire(0, 2, 100, high_watermark=2, token=7) == [0, 1]
    assert not share.lease_expired(0, 7, now_ms=99) and share.ack(0, 7, now_ms=99)
    assert not share.ack(1, 7, now_ms=100) and not share.nack(1, 7, now_ms=100, delay_ms=0)
    assert share.lease_expired(1, 7, now_ms=100) and not share.lease_expired(1, 8, now_ms=100)
    assert share.entries[1].state == LEASED, "not yet swept: the refusal alone must not settle it"
    assert share.acquire(100, 1, 100, high_watermark=2, token=9) == [1], "delivered again"
    assert not share.lease_expired(1, 7, now_ms=150), "now another receiver's: the old receipt is just stale"


def test_an_offset_no_recorded_lease_took_is_delivered_after_a_replay():
    """A receive whose lease event never became durable (its leader lost its session) leaves no
    trace in the log; the next lease recorded skips past that offset. Rebuilt from the log, the
    offset must still be delivered (a chaos run lost an acknowledged queue message here)."""
    rebuilt = PartitionShare(max_deliveries=3)
    for event in (lease_event(1, 1_000, [0]), ack_event([0]), lease_event(2, 2_000, [2]), ack_event([2])):
        rebuilt.apply(event)
    rebuilt.after_replay(now_ms=3_000)
    assert rebuilt.acquire(3_000, 10, 100, high_watermark=3, token=3) == [1]
    assert rebuilt.acquire(3_050, 10, 100, high_watermark=3, token=4) == [], "leased once"
    assert rebuilt.ack(1, 3, now_ms=3_050) and rebuilt.done_below == 3


def test_a_withdrawn_lease_is_no_delivery_and_the_message_is_available_at_once():
    share = PartitionShare(max_deliveries=2)
    for token in range(1, 6):  # five receives that never answered: nothing is dead-lettered
        assert share.acquire(0, 2, 100, high_watermark=2, token=token) == [0, 1]
        share.withdraw([0, 1], token)
    assert share.take_dead() == [] and share.entries[0].count == 0
    assert share.acquire(0, 2, 100, high_watermark=2, token=9) == [0, 1]
    share.withdraw([0], token=8)  # another receive's token withdraws nothing
    assert share.entries[0].count == 1 and share.ack(0, 9, now_ms=1)


def test_replaying_a_withdrawal_rebuilds_the_state_that_wrote_it():
    share = PartitionShare(max_deliveries=3)
    events = [lease_event(4, 100, share.acquire(0, 3, 100, high_watermark=3, token=4))]
    share.withdraw([0, 1, 2], 4)
    events.append(withdraw_event(4, [0, 1, 2]))
    rebuilt = PartitionShare(max_deliveries=3)
    for event in events:
        rebuilt.apply(event)
    assert {o: (e.state, e.count) for o, e in rebuilt.entries.items()} == \
        {o: (e.state, e.count) for o, e in share.entries.items()} == {0: (0, 0), 1: (0, 0), 2: (0, 0)}


class ShareMachine(RuleBasedStateMachine):
    """Random receives, acks, nacks, clock steps and restarts (replay of the recorded events)."""

    MAX = 3

    def __init__(self) -> None:
        super().__init__()
        self.share = PartitionShare(self.MAX, window_max=20)
        self.events: list[list] = []
        self.now = 0
        self.high_watermark = 0
        self.token = 0
        self.receipts: list[tuple[int, int, int]] = []  # (offset, token, until)
        self.acked: set[int] = set()
        self.dead: set[int] = set()
        self.deliveries: dict[int, int] = {}

    @rule(n=st.integers(1, 10))
    def produce(self, n):
        self.high_watermark += n

    @rule(ms=st.integers(1, 300))
    def tick(self, ms):
        self.now += ms

    @rule(n=st.integers(0, 8), visibility=st.integers(1, 200))
    def receive(self, n, visibility):
        self.token += 1
        got = self.share.acquire(self.now, n, visibility, self.high_watermark, self.token)
        assert got == sorted(set(got)) and len(got) <= n
        live = {o for o, _, until in self.receipts if until > self.now}
        for offset in got:
            assert offset not in self.acked and offset not in self.dead, "finished messages never come back"
            assert offset not in live, "one lease at a time"
            assert offset < self.high_watermark
            self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
            assert self.deliveries[offset] <= self.MAX
        self.receipts = [r for r in self.receipts if r[0] not in got]
        self.receipts += [(o, self.token, self.now + visibility) for o in got]
        if got:
            self.events.append(lease_event(self.token, self.now + visibility, got))
        self._dead_letter()

    @rule(n=st.integers(1, 8), visibility=st.integers(1, 200))
    def receive_that_fails(self, n, visibility):
        """A receive whose lease event did not become durable: its leases are withdrawn."""
        self.token += 1
        got = self.share.acquire(self.now, n, visibility, self.high_watermark, self.token)
        live = {o for o, _, until in self.receipts if until > self.now}
        assert not (set(got) & (live | self.acked | self.dead))
        self.share.withdraw(got, self.token)
        if got:
            self.events += [lease_event(self.token, self.now + visibility, got), withdraw_event(self.token, got)]
        self._dead_letter()

    @precondition(lambda self: self.receipts)
    @rule(i=st.integers(0, 1000), forged=st.booleans())
    def ack(self, i, forged):
        offset, token, until = self.receipts[i % len(self.receipts)]
        if forged:
            assert not self.share.ack(offset, token + 10_000, self.now)
            return
        running = until > self.now
        if self.share.ack(offset, token, self.now):
            assert running, "an expired receipt never settles"
            assert offset not in self.acked
            self.acked.add(offset)
            self.events.append(ack_event([offset]))
        else:
            assert not running, "a running lease's receipt settles"
        self.receipts = [r for r in self.receipts if r[0] != offset]

    @precondition(lambda self: self.receipts)
    @rule(i=st.integers(0, 1000), delay=st.integers(0, 100))
    def nack(self, i, delay):
        offset, token, until = self.receipts.pop(i % len(self.receipts))
        if self.share.nack(offset, token, self.now, delay):
            assert until > self.now, "an expired receipt never settles"
            self.events.append(nack_event(self.now + delay if delay else 0, [offset]))
        self._dead_letter()

    def _dead_letter(self):
        dead = self.share.take_dead()
        for offset in dead:
            assert self.deliveries[offset] == self.MAX
            self.share.dead_lettered(offset)
            self.dead.add(offset)
        if dead:
            self.events.append(dead_event(dead))

    @rule()
    def snapshot(self):
        """Compaction: the snapshot replaces every event before it."""
        self.events = [self.share.snapshot_event()]

    @rule()
    def restart(self):
        rebuilt = PartitionShare(self.MAX, window_max=20)
        for event in self.events:
            rebuilt.apply(event)
        rebuilt.after_replay(self.now)
        self.share.expire(self.now)
        assert rebuilt.done_below == self.share.done_below and rebuilt.next_offset == self.share.next_offset
        assert {o: (e.state, e.count, e.token) for o, e in rebuilt.entries.items()} == \
            {o: (e.state, e.count, e.token) for o, e in self.share.entries.items()}
        self.share = rebuilt
        self._dead_letter()

    @invariant()
    def finished_offsets_are_below_or_absent(self):
        assert all(o >= self.share.done_below for o in self.share.entries)
        assert not (self.acked & self.dead)
        for offset in range(self.share.done_below):
            assert offset in self.acked or offset in self.dead
        assert all(e.count <= self.MAX for e in self.share.entries.values())
        assert self.share.next_offset - self.share.done_below <= 20
        assert all(e.token != 0 for e in self.share.entries.values() if e.state == LEASED)


TestShareMachine = ShareMachine.TestCase
