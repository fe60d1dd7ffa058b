"""The partition state machine and the live ``Leadership`` agree: the same appends, follower
answers and committed ISR changes, given to both, move the high watermark alike and settle the
same ``acks=all`` writes the same way (acknowledged, or failed with ``not_enough_replicas``).

This is what lets the shell move onto ``partition_machine.step`` piece by piece (decision 0340).
The ISR changes here are the coordinator's (``Leadership.update`` / ``IsrCommitted``): the
machine proposes its own on a follower's answer, which ``Leadership`` leaves to its ISR upkeep, so
every follower starts in the ISR and only leaves it."""

from __future__ import annotations

import asyncio
import tempfile
from concurrent.futures import ThreadPoolExecutor

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator.models import PartitionState
from logbroker import partition_machine as pm
from logbroker.errors import NotEnoughReplicasError
from logbroker.replica_manager import Replica, WaiterBudget
from logbroker.replication.leader import Leadership
from segments.config import LogConfig
from segments.group_commit import GroupCommit
from segments.log import PartitionLog
from tests.segments.helpers import batch_of

ME = 1
REPLICAS = (1, 2, 3)
EPOCH = 2


class MachineAgainstLeadership(RuleBasedStateMachine):
    @initialize(min_insync=st.integers(min_value=1, max_value=3))
    def start(self, min_insync: int) -> None:
        self.root = tempfile.TemporaryDirectory()
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.loop = asyncio.new_event_loop()
        log = PartitionLog.open(f"{self.root.name}/t-0", LogConfig(flush="interval"))
        self.replica = Replica("t", 0, log, GroupCommit(log, self.pool), WaiterBudget(10), high_watermark=0)
        self.replica.epoch = EPOCH
        self.min_insync = min_insync
        self.isr: tuple[int, ...] = REPLICAS
        self.lead = Leadership(self.replica, PartitionState("t", 0, REPLICAS, self.isr, ME, EPOCH), ME, min_insync,
                               fenced=lambda: False)
        self.replica.leader_hook = lambda _r: self.lead.recompute()
        self.state, _ = pm.step(pm.PartitionState("t", 0, ME),
                                pm.BecameLeader(EPOCH, REPLICAS, self.isr, min_insync, pm.LEASE_FOREVER_MS), 0)
        self.held = {2: 0, 3: 0}
        self.proposed: tuple[int, ...] | None = None  # an ISR change sent, not committed yet
        self.futures: dict[int, asyncio.Future[None]] = {}  # by end: the live waiter of each acks=all write
        self.settled: dict[int, str] = {}  # by end: how the machine settled it

    def teardown(self) -> None:
        if hasattr(self, "replica"):
            self.replica.log.close()
            self.pool.shutdown()
            self.loop.close()
            self.root.cleanup()

    def _machine(self, event: pm.Event) -> None:
        self.state, effects = pm.step(self.state, event, 0)
        for effect in effects:
            if isinstance(effect, pm.Acknowledge | pm.FailWaiters):
                outcome = "ok" if isinstance(effect, pm.Acknowledge) else effect.code
                for end in [e for e in self.futures if e <= effect.up_to and e not in self.settled]:
                    self.settled[end] = outcome

    @rule(records=st.integers(min_value=1, max_value=4), acks_all=st.booleans())
    def append(self, records: int, acks_all: bool) -> None:
        if pm.check_append(self.state, "all" if acks_all else "1", 0) is not None:
            return
        info = self.replica.append(batch_of([b"v"] * records))
        end = info.log_end_offset
        self.replica.local_end = end  # what ``Replica.commit`` does under the interval policy
        self.lead.recompute()
        if acks_all:  # what ``wait_committed`` does
            future = self.loop.create_future()
            self.futures[end] = future
            if self.replica.high_watermark >= end and len(self.lead.isr) >= self.lead.min_insync:
                future.set_result(None)
            else:
                self.lead._acks.append((end, future, 0))
        self._machine(pm.Appended(end, "all" if acks_all else "1"))

    @rule(node=st.sampled_from((2, 3)), data=st.data())
    def fetched(self, node: int, data: st.DataObject) -> None:
        end = self.replica.log.log_end_offset
        self.held[node] = data.draw(st.integers(min_value=self.held[node], max_value=max(self.held[node], end)))
        outside = node not in self.isr
        self.lead.followers[node].log_end = self.held[node]
        self.lead.recompute()
        if not outside:  # an answer from outside the ISR would make the machine propose it back
            self._machine(pm.FollowerFetched(node, self.held[node]))

    @rule(node=st.sampled_from((2, 3)))
    def lags(self, node: int) -> None:
        """The ISR upkeep wants ``node`` out: the transaction is sent, the coordinator has not committed it."""
        if node in self.isr and self.proposed is None:
            self.proposed = tuple(n for n in self.isr if n != node)
            self._machine(pm.FollowerLagged(node))

    @rule()
    def isr_commits(self) -> None:
        if self.proposed is None:
            return
        self.isr, self.proposed = self.proposed, None
        self.lead.update(PartitionState("t", 0, REPLICAS, self.isr, ME, EPOCH), self.min_insync)
        self._machine(pm.IsrCommitted(self.isr))

    @invariant()
    def they_agree(self) -> None:
        if not hasattr(self, "replica"):
            return
        assert self.replica.high_watermark == self.state.high_watermark
        for end, future in self.futures.items():
            machine = self.settled.get(end)
            if not future.done():
                assert machine is None, f"the machine settled {end} ({machine}), the leadership did not"
                continue
            error = future.exception()
            live = "ok" if error is None else ("not_enough_replicas" if isinstance(error, NotEnoughReplicasError)
                                               else repr(error))
            assert live == machine, f"write to {end}: the leadership says {live}, the machine {machine}"


TestMachineAgainstLeadership = MachineAgainstLeadership.TestCase
TestMachineAgainstLeadership.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
