"""A Hypothesis state machine: ``logbroker.partition_machine`` driven by random events against a
model of what the replicas hold and what the coordinator committed.

The model keeps each follower's real log end (it only grows, up to the leader's), the ISR the
coordinator holds (a ``WriteIsr`` effect commits only when a rule says the transaction went
through) and every ``acks=all`` write. The invariants: the high watermark never goes back, never
passes the log end, never passes what any member of the committed ISR holds; an ``acks=all`` write
is acknowledged only when every committed member holds it and the committed ISR has at least
``min_insync`` members; every such write is settled once; the high watermark moves only while the
lease is proven; the write gate refuses exactly what it must.
"""

from __future__ import annotations

from collections import Counter

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from logbroker import partition_machine as pm

ME = 1
REPLICAS = (1, 2, 3)
FOLLOWERS = (2, 3)
LEASE_MS = 1_000


class PartitionModel(RuleBasedStateMachine):
    @initialize(min_insync=st.integers(min_value=1, max_value=3))
    def start(self, min_insync: int) -> None:
        self.now = 0
        self.epoch = 1
        self.lease_until = LEASE_MS
        self.held = {n: 0 for n in FOLLOWERS}  # what each follower really holds
        self.coordinator_isr: tuple[int, ...] = REPLICAS  # as the coordinator committed it
        self.coordinator_elr: tuple[int, ...] = ()
        self.proposed: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # a WriteIsr in flight (ISR, ELR)
        self.waiting: Counter[int] = Counter()  # acks=all writes not settled yet, by end
        self.acknowledged: list[int] = []
        self.min_insync = min_insync
        self.state = pm.PartitionState("t", 0, ME)
        self.best_hw = 0
        self._step(pm.BecameLeader(self.epoch, REPLICAS, self.coordinator_isr, min_insync, self.lease_until))

    def _step(self, event: pm.Event) -> None:
        before = self.state
        self.state, effects = pm.step(self.state, event, self.now)
        for effect in effects:
            self._apply(effect, before)

    def _apply(self, effect: pm.Effect, before: pm.PartitionState) -> None:
        match effect:
            case pm.WriteIsr(epoch=epoch, isr=isr, elr=elr):
                assert self.proposed is None, "a second ISR change while one is in flight"
                assert epoch == self.epoch and ME in isr and not set(isr) & set(elr)
                assert not elr or len(isr) < self.min_insync, "an ELR only under min_insync"
                self.proposed = isr, elr
            case pm.Expose(high_watermark=hw):
                assert self.now < self.state.lease_until_ms, "the high watermark moved on a lapsed lease"
                assert hw > before.high_watermark
            case pm.Acknowledge(up_to=up_to):
                assert len(self.coordinator_isr) >= self.min_insync
                for end in [e for e in self.waiting if e <= up_to]:
                    for node in self.coordinator_isr:
                        assert node == ME or self.held[node] >= end, \
                            f"acknowledged {end} while ISR member {node} holds only {self.held[node]}"
                    self.acknowledged.extend([end] * self.waiting.pop(end))
            case pm.FailWaiters(up_to=up_to, code=code):
                assert code == "not_leader" or len(self.coordinator_isr) < self.min_insync
                for end in [e for e in self.waiting if e <= up_to]:
                    del self.waiting[end]
            case pm.Ship() | pm.AppendCopied() | pm.RefuseShipment():
                pass

    # ---- rules --------------------------------------------------------------------------

    @rule(records=st.integers(min_value=1, max_value=5), acks=st.sampled_from(["0", "1", "all"]))
    def append(self, records: int, acks: str) -> None:
        error = pm.check_append(self.state, acks, self.now)
        writable = (self.state.leads and self.now < self.lease_until and self.state.phase is pm.Phase.SERVING
                    and (acks != "all" or len(self.coordinator_isr) >= self.min_insync))
        assert (error is None) == writable, (error, self.state)
        if error is not None:
            return
        end = self.state.log_end + records
        if acks == "all":
            self.waiting[end] += 1
        self._step(pm.Appended(end, acks))  # type: ignore[arg-type]

    @rule(node=st.sampled_from(FOLLOWERS), data=st.data())
    def fetch(self, node: int, data: st.DataObject) -> None:
        self.held[node] = data.draw(st.integers(min_value=self.held[node], max_value=max(self.held[node],
                                                                                         self.state.log_end)))
        self._step(pm.FollowerFetched(node, self.held[node]))

    @rule(node=st.sampled_from(FOLLOWERS))
    def lag(self, node: int) -> None:
        self._step(pm.FollowerLagged(node))

    @precondition(lambda self: self.proposed is not None)
    @rule()
    def isr_commits(self) -> None:
        assert self.proposed is not None
        (self.coordinator_isr, self.coordinator_elr), self.proposed = self.proposed, None
        self._step(pm.IsrCommitted(self.coordinator_isr, self.coordinator_elr))

    @precondition(lambda self: self.proposed is not None)
    @rule()
    def isr_fails(self) -> None:
        self.proposed = None
        self._step(pm.IsrFailed())

    @rule(ms=st.integers(min_value=1, max_value=600))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def lease_renewed(self) -> None:
        self.lease_until = self.now + LEASE_MS
        self._step(pm.LeaseRenewed(self.lease_until))

    @rule(phase=st.sampled_from(["freeze", "thaw", "hand-over", "hand-over-ended"]))
    def phase_change(self, phase: str) -> None:
        events: dict[str, pm.Event] = {"freeze": pm.Freeze(self.now + 10_000), "thaw": pm.Thaw(),
                                       "hand-over": pm.HandOver(), "hand-over-ended": pm.HandOverEnded()}
        event = events[phase]
        self._step(event)

    @precondition(lambda self: self.proposed is None)
    @rule()
    def re_elected(self) -> None:
        """The session is lost (the leadership ends, its waiters fail) and this node wins the next
        election with the ISR the coordinator holds."""
        self._step(pm.BecameFollower(self.epoch))
        assert not self.waiting and not self.state.leads
        self.epoch += 1
        self.lease_until = self.now + LEASE_MS
        self._step(pm.BecameLeader(self.epoch, REPLICAS, self.coordinator_isr, self.min_insync, self.lease_until,
                                   self.coordinator_elr))

    # ---- invariants ---------------------------------------------------------------------

    @invariant()
    def high_watermark_holds(self) -> None:
        state = self.state
        assert self.best_hw <= state.high_watermark <= state.log_end
        self.best_hw = state.high_watermark
        members = set(self.coordinator_isr) | set(state.isr.expanding) | set(self.coordinator_elr)
        for node in members - {ME}:  # an eligible leader replica may lead next: it holds what was visible
            assert state.high_watermark <= self.held[node], \
                f"high watermark {state.high_watermark} passes ISR or ELR member {node} at {self.held[node]}"

    @invariant()
    def the_isr_counts_only_once_committed(self) -> None:
        isr = self.state.isr
        assert isr.committed == self.coordinator_isr and isr.eligible == self.coordinator_elr
        assert set(isr.shrinking) <= set(isr.committed) and not set(isr.expanding) & set(isr.committed)
        assert isr.changing == (self.proposed is not None)

    @invariant()
    def every_waiting_write_is_known(self) -> None:
        assert Counter(self.state.waiting) == self.waiting
        assert all(end > self.state.high_watermark for end in self.waiting)


TestPartitionModel = PartitionModel.TestCase
TestPartitionModel.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
