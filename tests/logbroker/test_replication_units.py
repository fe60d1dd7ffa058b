"""The replication pieces on real partition logs, without a cluster: a ``Leadership`` (high
watermark over the ISR, ``acks=all`` waits, ``min_insync_replicas``, fencing, the end of a
leadership) and the follower's side of a shipment (epochs, order, truncation), shipping between
two logs through a ``Shipper`` whose call is a plain function."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import msgspec
import pytest

from coordinator.base import Coordinator
from coordinator.models import NodeInfo, PartitionState
from internal_rpc.frames import pack, unpack
from internal_rpc.messages import VERSION, MessageError, ReplicateAnswer, ReplicateRequest, ShipmentEntry, decode
from logbroker.config import NodeConfig
from logbroker.errors import BrokerError, NotEnoughReplicasError, NotLeaderError, ReplicationTimeoutError
from logbroker.partition_machine import LEASE_FOREVER_MS, check_append
from logbroker.partition_state import UNKNOWN, ready_to_join, stalling
from logbroker.replica_manager import Replica, WaiterBudget
from logbroker.replication import shipper as shipper_module
from logbroker.replication.follower import FollowerSide
from logbroker.replication.leader import Leadership, now_ms
from logbroker.replication.manager import TICK_S, ReplicationManager
from logbroker.replication.shipper import Shipper
from segments.batch import ProducerRecord, encode_batch
from segments.config import LogConfig
from segments.group_commit import GroupCommit
from segments.log import PartitionLog
from tests.segments.helpers import batch_of, read_all


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


def _replica(path: str, pool: ThreadPoolExecutor) -> Replica:
    log = PartitionLog.open(path, LogConfig(flush="interval"))
    return Replica("t", 0, log, GroupCommit(log, pool), WaiterBudget(10), high_watermark=0)


def _state(isr: tuple[int, ...], epoch: int = 1, replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionState:
    return PartitionState("t", 0, replicas, isr, 1, epoch)


def _gate(lead: Leadership, acks: str) -> None:
    """The write gate over ``lead``'s partition (a proven lease, no freeze)."""
    error = check_append(lead.machine_state(LEASE_FOREVER_MS), acks, 0)
    if error is not None:
        raise error


def _values(replica: Replica) -> list[bytes]:
    return [value for _, value in read_all(replica.log)]


@pytest.mark.asyncio
async def test_acks_all_waits_for_every_in_sync_replica(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1, 2, 3)), 1, min_insync=2, fenced=lambda: False)
    replica.leader_hook = lambda _r: lead.recompute()
    replica.epoch = 1
    info = replica.append(batch_of([b"a", b"b"]))
    await replica.commit(info)
    assert replica.high_watermark == 0, "followers' log ends are not known yet"
    waiting = asyncio.ensure_future(lead.wait_committed(info.log_end_offset, 5))
    lead.followers[2].log_end = 2
    lead.recompute()
    await asyncio.sleep(0)
    assert not waiting.done() and replica.high_watermark == 0
    lead.followers[3].log_end = 1
    lead.recompute()
    assert replica.high_watermark == 1
    lead.followers[3].log_end = 2
    lead.recompute()
    await asyncio.wait_for(waiting, 1)
    assert replica.high_watermark == 2
    replica.log.close()


@pytest.mark.asyncio
async def test_a_follower_stalling_the_oldest_waiting_write_leaves_and_the_write_is_released(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1, 2, 3)), 1, min_insync=2, fenced=lambda: False)
    replica.leader_hook = lambda _r: lead.recompute()
    replica.epoch = 1
    info = replica.append(batch_of([b"a", b"b"]))
    await replica.commit(info)
    assert lead.oldest_waiting() is None
    waiting = asyncio.ensure_future(lead.wait_committed(info.log_end_offset, 5))
    await asyncio.sleep(0)
    oldest = lead.oldest_waiting()
    assert oldest is not None and oldest[0] == 2
    lead.followers[2].log_end = 2  # follower 3 answers nothing (crashed, paused, cut off)
    lead.recompute()
    assert not waiting.done()
    since = oldest[1]
    assert stalling(lead.isr, 1, lead.followers, oldest, since + 499, 500, 2) == []
    assert stalling(lead.isr, 1, lead.followers, oldest, since + 500, 500, 2) == [3]
    lead.recompute()
    assert not waiting.done(), "a member leaving counts until the coordinator holds the smaller ISR"
    lead.update(_state((1, 2)), 2)
    await asyncio.wait_for(waiting, 1)
    assert replica.high_watermark == 2 and lead.oldest_waiting() is None
    replica.log.close()


@pytest.mark.asyncio
async def test_min_insync_refuses_before_the_append_and_after_a_shrink(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1,)), 1, min_insync=2, fenced=lambda: False)
    with pytest.raises(NotEnoughReplicasError):
        _gate(lead, "all")
    _gate(lead, "1")  # acks=1 is not bound by min_insync_replicas
    lead.update(_state((1, 2)), 2)
    _gate(lead, "all")
    replica.leader_hook = lambda _r: lead.recompute()
    info = replica.append(batch_of([b"x"]))
    await replica.commit(info)
    waiting = asyncio.ensure_future(lead.wait_committed(info.log_end_offset, 5))
    await asyncio.sleep(0)
    lead.update(_state((1,)), 2)  # the follower left: the high watermark is the leader's end, but too few
    with pytest.raises(NotEnoughReplicasError):
        await asyncio.wait_for(waiting, 1)
    replica.log.close()


@pytest.mark.asyncio
async def test_the_high_watermark_stays_while_eligible_leader_replicas_are_named(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1, 2)), 1, min_insync=2, fenced=lambda: False)
    replica.leader_hook = lambda _r: lead.recompute()
    replica.epoch = 1
    await replica.commit(replica.append(batch_of([b"a", b"b"])))
    lead.followers[2].log_end = 1
    lead.followers[3].log_end = 0
    lead.recompute()
    assert replica.high_watermark == 1
    waiting = asyncio.ensure_future(lead.wait_committed(2, 30))
    await asyncio.sleep(0)
    lead.update(dataclasses.replace(_state((1,)), elr=(2,)), 2)  # follower 2 dropped under min_insync
    with pytest.raises(NotEnoughReplicasError):  # at once: the high watermark will not pass it
        await asyncio.wait_for(waiting, 1)
    info = replica.append(batch_of([b"c"]))
    await replica.commit(info)
    assert replica.high_watermark == 1, "follower 2, which may lead next, holds only what lies below it"
    with pytest.raises(NotEnoughReplicasError):
        await lead.wait_committed(info.log_end_offset, 30)
    lead.followers[3].log_end = 3
    lead.update(_state((1, 3)), 2)  # back at min_insync: the ELR is cleared
    assert replica.high_watermark == 3
    replica.log.close()


@pytest.mark.asyncio
async def test_a_fenced_leader_does_not_advance_and_a_closed_one_fails_its_waiters(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    fenced = [False]
    lead = Leadership(replica, _state((1, 2)), 1, min_insync=1, fenced=lambda: fenced[0])
    replica.leader_hook = lambda _r: lead.recompute()
    info = replica.append(batch_of([b"x"]))
    await replica.commit(info)
    waiting = asyncio.ensure_future(lead.wait_committed(info.log_end_offset, 5))
    fenced[0] = True
    lead.followers[2].log_end = 1
    lead.recompute()
    await asyncio.sleep(0)
    assert replica.high_watermark == 0 and not waiting.done(), "a fenced leader acknowledges nothing"
    lead.close("deposed")
    with pytest.raises(NotLeaderError):
        await asyncio.wait_for(waiting, 1)
    assert replica.leader_hook is None and replica.ack_wait is None
    with pytest.raises(NotLeaderError):
        replica.append(batch_of([b"y"]))  # a cluster replica without a leadership takes no writes
    with pytest.raises(NotLeaderError):
        _gate(lead, "1")
    replica.log.close()


@pytest.mark.asyncio
async def test_an_unconfirmed_write_times_out_as_replication_timeout(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1, 2)), 1, min_insync=1, fenced=lambda: False)
    replica.leader_hook = lambda _r: lead.recompute()
    info = replica.append(batch_of([b"x"]))
    await replica.commit(info)
    with pytest.raises(ReplicationTimeoutError):
        await lead.wait_committed(info.log_end_offset, 0.05)
    replica.log.close()


class Pair:
    """A leader's replica and a follower's, shipped between by a ``Shipper`` whose call applies
    the entries to the follower directly (the request and the answer through the frame encoding,
    as on the wire)."""

    def __init__(self, leader: Replica, follower: Replica, known_epoch: list[int]) -> None:
        self.leader = leader
        self.follower = follower
        self.side = FollowerSide(lambda t, p, i: follower, lambda t, p, i: known_epoch[0], lambda t, p: None,
                                 lambda t, p, e: None)
        self.leaderships: list[Leadership] = []
        self.stale: list[int] = []
        self.shipper = Shipper(2, lambda node: self.leaderships, self._call, lambda topic: "id",
                               lambda lead, epoch: self.stale.append(epoch))

    async def _call(self, node: int, request: ReplicateRequest) -> ReplicateAnswer:
        received = decode(ReplicateRequest, unpack(pack({"b": request}))["b"])
        answer = ReplicateAnswer(results=[self.side.apply(entry)[0] for entry in received.entries])
        return decode(ReplicateAnswer, unpack(pack({"b": answer}))["b"])

    async def ship_all(self) -> None:
        for _ in range(20):
            if not await self.shipper.ship_once():
                break


@pytest.mark.asyncio
async def test_shipping_copies_the_log_and_truncates_a_divergent_tail(tmp_path, pool):
    leader = _replica(str(tmp_path / "l" / "t-0"), pool)
    follower = _replica(str(tmp_path / "f" / "t-0"), pool)
    known = [1]
    pair = Pair(leader, follower, known)
    # Both wrote epoch 1 together; then the follower (a deposed leader) wrote on alone at epoch 1,
    # while the leader wrote epoch 2.
    leader.epoch = follower.epoch = 1
    leader.leader_hook = follower.leader_hook = lambda _r: None
    for replica in (leader, follower):
        replica.append(batch_of([b"shared-0", b"shared-1"]))
    follower.append(batch_of([b"divergent"]))
    follower.leader_hook = None
    leader.epoch = 2
    leader.append(batch_of([b"new-2", b"new-3"]))
    known[0] = 2
    lead = Leadership(leader, _state((1, 2), epoch=2, replicas=(1, 2)), 1, min_insync=1, fenced=lambda: False)
    leader.leader_hook = lambda _r: lead.recompute()
    pair.leaderships.append(lead)
    await pair.ship_all()
    assert _values(follower) == [b"shared-0", b"shared-1", b"new-2", b"new-3"]
    assert lead.followers[2].log_end == 4 and leader.high_watermark == 4
    await pair.ship_all()
    assert follower.high_watermark == 4, "the high watermark reaches the follower"
    assert follower.log.epoch_entries() == leader.log.epoch_entries()

    # A shipment from an older epoch is refused; the leadership learns it is over.
    known[0] = 3
    leader.append(batch_of([b"late"]))
    await pair.ship_all()
    assert pair.stale == [3]
    assert _values(follower)[-1] == b"new-3"
    for replica in (leader, follower):
        replica.log.close()


def test_malformed_shipments_are_refused():
    entry = {"topic": "t", "topic_id": "i", "partition": 0, "epoch": 0, "hw": 0, "start": 0, "leader_end": 0,
             "leader_start": 0}
    assert decode(ReplicateRequest, {"v": VERSION, "entries": [entry]}).entries[0].high_watermark == 0
    for request in ({"v": VERSION, "entries": "x"}, {"v": VERSION, "entries": [1]},
                    {"v": VERSION, "entries": [{"topic": "t"}]},
                    {"v": VERSION, "entries": [{**entry, "partition": -1}]},
                    {"v": VERSION, "entries": [{**entry, "leader_epochs": [[1]]}]},
                    {"v": VERSION, "entries": [{**entry, "data": "not bytes"}]},
                    {"v": VERSION, "entries": [entry] * 4097},
                    {"entries": [entry]}, {"v": VERSION + 1, "entries": [entry]}):
        with pytest.raises(MessageError):
            decode(ReplicateRequest, request)


def test_an_align_entry_is_a_version_2_field_and_a_version_1_sync_entry_is_refused_naming_both_versions():
    """Decision 0370: the entry that makes a follower's log a prefix of its leader's is ``align``
    on the wire; a body of the version that called it ``sync`` is refused, never misread."""
    entry = {"topic": "t", "topic_id": "i", "partition": 0, "epoch": 0, "hw": 0, "leader_end": 0, "leader_start": 0}
    assert VERSION == 2
    assert decode(ReplicateRequest, {"v": VERSION, "entries": [{**entry, "align": True}]}).entries[0].align
    wire = msgspec.to_builtins(ShipmentEntry(topic="t", topic_id="i", partition=0, epoch=0, high_watermark=0,
                                             leader_end=0, leader_start=0, align=True))
    assert wire["align"] is True and "sync" not in wire
    with pytest.raises(MessageError, match=r"version 1 .* speaks 2"):
        decode(ReplicateRequest, {"v": 1, "entries": [{**entry, "sync": True}]})
    with pytest.raises(MessageError):
        decode(ReplicateRequest, {"v": VERSION, "entries": [{**entry, "sync": True}]})


@pytest.mark.asyncio
async def test_a_write_whose_leadership_ends_before_it_is_confirmed_fails(tmp_path, pool):
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1, 2)), 1, min_insync=1, fenced=lambda: False)
    replica.leader_hook = lambda _r: lead.recompute()
    replica.ack_wait = lambda end: lead.wait_committed(end, 5)
    waiting = replica.commit_replicated(replica.append(batch_of([b"a"])))  # appended and waiting
    appended = replica.append(batch_of([b"b"]))
    lead.close("deposed")  # before the second write's commit was even created
    late = replica.commit_replicated(appended)
    for pending in (waiting, late):
        with pytest.raises(NotLeaderError):
            await asyncio.wait_for(pending, 1)
    assert replica.high_watermark == 0, "nothing was confirmed"
    replica.log.close()


@pytest.mark.asyncio
async def test_a_truncation_fails_durability_waits_past_the_cut(tmp_path, pool):
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(flush="always"))
    commit = GroupCommit(log, pool)
    replica = Replica("t", 0, log, commit, WaiterBudget(10), high_watermark=0)
    replica.append_copied(encode_batch([ProducerRecord(b"x")], base_offset=0, leader_epoch=1))
    tail = replica.append_copied(encode_batch([ProducerRecord(b"y")], base_offset=1, leader_epoch=1))
    waiter = asyncio.ensure_future(commit.wait_durable(tail.last_offset + 5))  # a range no flush will cover
    await asyncio.sleep(0.05)
    replica.truncate(1)
    with pytest.raises(NotLeaderError):
        await asyncio.wait_for(waiter, 1)
    assert log.log_end_offset == 1
    log.close()


class ShippingToOne:
    """A leader with one record for follower 2, shipped by a ``Shipper`` whose call is
    ``call(pair, node, request)``: what the test makes of the network."""

    def __init__(self, tmp_path: Any, pool: ThreadPoolExecutor,
                 call: Callable[[Pair, int, ReplicateRequest], Awaitable[ReplicateAnswer]]) -> None:
        leader = _replica(str(tmp_path / "l" / "t-0"), pool)
        self.follower = _replica(str(tmp_path / "f" / "t-0"), pool)
        self.pair = pair = Pair(leader, self.follower, [1])
        self.shipper = Shipper(2, lambda node: pair.leaderships, lambda node, request: call(pair, node, request),
                               lambda topic: "id", lambda lead, epoch: None)
        leader.epoch = self.follower.epoch = 1
        lead = Leadership(leader, _state((1, 2), epoch=1, replicas=(1, 2)), 1, min_insync=1, fenced=lambda: False)
        leader.leader_hook = lambda _r: lead.recompute()
        pair.leaderships.append(lead)
        leader.append(batch_of([b"a"]))

    async def delivered(self, within_s: float) -> bool:
        for _ in range(int(within_s / 0.01)):
            if _values(self.follower) == [b"a"]:
                return True
            await asyncio.sleep(0.01)
        return False

    async def close(self) -> None:
        await self.shipper.close()
        for replica in (self.pair.leader, self.follower):
            replica.log.close()


@pytest.mark.asyncio
async def test_a_follower_that_registers_again_is_shipped_to_at_once_not_after_the_backoff(
        tmp_path, pool, monkeypatch):
    """After failed calls the shipper backs off; ``hurry`` (the follower registered again, e.g.
    its session is back after a network cut) ends the backoff at once. The backoff here is far
    longer than the wait, so only ``hurry`` can deliver the record in time."""
    monkeypatch.setattr(shipper_module, "BACKOFF_MIN_S", 30.0)
    calls: list[bool] = []

    async def call(pair: Pair, node: int, request: ReplicateRequest) -> ReplicateAnswer:
        calls.append(bool(calls))
        if len(calls) == 1:
            raise BrokerError("node 2 did not answer")
        return await pair._call(node, request)

    shipping = ShippingToOne(tmp_path, pool, call)
    shipping.shipper.start()
    try:
        for _ in range(200):
            if calls:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert calls == [False], "the first call failed and the shipper backs off"
        shipping.shipper.hurry()
        assert await shipping.delivered(within_s=5.0), calls
    finally:
        await shipping.close()


@pytest.mark.asyncio
async def test_a_call_stuck_since_before_the_follower_registered_again_is_given_up(tmp_path, pool, monkeypatch):
    """A shipment sent into a network cut waits out its whole deadline (5 s) though the follower
    is back: when it registers again, ``hurry`` gives up a call unanswered for ``STUCK_CALL_S``
    and ships anew at once (decision 0383). A call that never answers plays the lost one."""
    monkeypatch.setattr(shipper_module, "STUCK_CALL_S", 0.1)
    calls: list[str] = []

    async def call(pair: Pair, node: int, request: ReplicateRequest) -> ReplicateAnswer:
        if not calls:
            calls.append("lost")
            try:
                await asyncio.Event().wait()  # never answered
            except asyncio.CancelledError:
                calls.append("given up")
                raise
        calls.append("answered")
        return await pair._call(node, request)

    shipping = ShippingToOne(tmp_path, pool, call)
    shipping.shipper.start()
    try:
        await asyncio.sleep(0.05)
        shipping.shipper.hurry()  # too soon: a call this young is left alone
        await asyncio.sleep(0.15)
        assert calls == ["lost"]
        shipping.shipper.hurry()
        assert await shipping.delivered(within_s=3.0) and calls[:2] == ["lost", "given up"], calls
    finally:
        await shipping.close()


class _Members:
    """The coordinator as the replication manager reads it here: the live nodes' registrations."""

    def __init__(self) -> None:
        self.started: dict[int, int] = {}
        self.resigned: list[tuple[str, int]] = []
        self.isr_changes: list[tuple[int, ...]] = []

    def cached_node(self, node: int) -> NodeInfo | None:
        started = self.started.get(node)
        return None if started is None else NodeInfo(node, f"http://n{node}", f"n{node}:1", started_ms=started)

    def cached_topic(self, topic: str) -> None:
        return None  # a shipment to an unknown topic is not sent: the followers here answer nothing

    async def resign(self, topic: str, partition: int) -> None:
        self.resigned.append((topic, partition))

    async def set_isr(self, topic: str, partition: int, leader_epoch: int, isr: tuple[int, ...],
                      elr: tuple[int, ...] = (), *, based_on: object = None) -> PartitionState:
        self.isr_changes.append(isr)
        return PartitionState(topic, partition, (1, 2, 3), isr, 1, leader_epoch, elr)


class _NoPeers:
    async def peer_stream_call(self, node: int, request: ReplicateRequest, *, deadline_s: float) -> ReplicateAnswer:
        raise BrokerError(f"node {node} is not reachable in this test")


@pytest.mark.asyncio
async def test_a_follower_registered_by_a_new_process_has_its_log_end_asked_again(tmp_path, pool):
    """What a leader heard from a follower's old process (its log end) does not let the new one
    rejoin the ISR: an unclean restart may have lost that tail. A session registered again by
    the same process keeps it."""
    members = _Members()
    manager = ReplicationManager(NodeConfig(node_id=1), cast(Coordinator, members), cast(Any, None),
                                 cast(Any, _NoPeers()))
    replica = _replica(str(tmp_path / "t-0"), pool)
    lead = Leadership(replica, _state((1, 2, 3)), 1, min_insync=2, fenced=lambda: False)
    manager.leaderships[lead.key] = lead
    try:
        members.started = {2: 100, 3: 100}
        lead.followers[2].log_end = lead.followers[3].log_end = 5
        manager.forget_restarted()
        assert (lead.followers[2].log_end, lead.followers[3].log_end) == (5, 5), "first seen: nothing to forget"
        members.started = {2: 100}  # node 3 is gone (its lease lapsed) ...
        manager.forget_restarted()
        members.started = {2: 100, 3: 250}  # ... and back as another process
        manager.forget_restarted()
        assert lead.followers[2].log_end == 5, "the same registration: kept"
        assert lead.followers[3].log_end is None, "the new process is asked where its log ends"
        assert ready_to_join((1, 2, 3), (1, 2), lead.followers, {1, 2, 3}, 5, 0) == []
    finally:
        await manager.close()
        replica.log.close()


def _leading_with_live_followers(tmp_path: Any, pool: ThreadPoolExecutor, replicas: tuple[int, ...]
                                 ) -> tuple[_Members, ReplicationManager, Replica, Leadership]:
    """A manager whose node 1 leads partition ``t``/0 (ISR 1, 2, 3; ``min_insync`` 2), nodes 2 and
    3 registered and alive; shipments go nowhere (``_NoPeers``)."""
    members = _Members()
    members.started = {2: 100, 3: 100}
    manager = ReplicationManager(NodeConfig(node_id=1), cast(Coordinator, members), cast(Any, None),
                                 cast(Any, _NoPeers()))
    replica = _replica(str(tmp_path / "t-0"), pool)
    replica.epoch = 1
    lead = Leadership(replica, _state((1, 2, 3), replicas=replicas), 1, min_insync=2, fenced=lambda: False)
    replica.leader_hook = lambda _r: lead.recompute()
    manager.leaderships[lead.key] = lead
    return members, manager, replica, lead


@pytest.mark.asyncio
async def test_a_hand_over_waits_for_every_isr_follower_to_answer_and_a_silent_one_is_judged_from_its_start(
        tmp_path, pool):
    """Failback refuses writes while the preferred replica takes the whole log, and the high
    watermark waits for every ISR follower: a hand-over begun while another follower is silent
    (paused, cut off) holds writes until it is given up. So it begins only when every ISR
    follower answered just now (the silent one is asked for a round trip first); one that falls
    silent during it ends it, and the writes it refused count as waiting from its start, so the
    stall rule lets the silent member go at the next round, not ``replica_stall_ms`` later."""
    members, manager, replica, lead = _leading_with_live_followers(tmp_path, pool, replicas=(2, 1, 3))
    try:
        info = replica.append(batch_of([b"a", b"b"]))
        await replica.commit(info)
        at = now_ms()
        lead.followers[2].log_end, lead.followers[2].answered_ms = 2, at
        lead.followers[3].log_end, lead.followers[3].answered_ms = 2, at - 450  # paused 450 ms ago
        lead.followers[2].high_watermark_sent = lead.followers[3].high_watermark_sent = 2
        lead.recompute()
        manager._begin_failback(lead, 2, at, 500)
        await asyncio.sleep(0.05)
        assert not lead.handing_over and not members.resigned, "node 3 has not answered for 450 ms: no hand-over"
        assert lead.followers[3].high_watermark_sent == UNKNOWN, "it is asked for a round trip"
        assert lead.followers[2].high_watermark_sent == UNKNOWN, \
            "so is every other member, so that their answers are fresh together at the next round"

        more = replica.append(batch_of([b"c"]))
        await replica.commit(more)
        lead.followers[3].answered_ms = now_ms()  # it answered that round trip, then fell silent
        manager._begin_failback(lead, 2, now_ms(), 100)
        await asyncio.sleep(0)
        assert lead.handing_over, "every ISR follower answered just now"
        began = now_ms()
        for _ in range(100):
            if not lead.handing_over:
                break
            await asyncio.sleep(0.01)
        assert not lead.handing_over and lead.held_since_ms is not None, "node 3 fell silent: given up"
        assert not members.resigned
        assert lead.held_since_ms <= began
        lead.followers[2].log_end, lead.followers[2].answered_ms = 3, now_ms()  # the target took it all
        waiting = asyncio.ensure_future(lead.wait_committed(more.log_end_offset, 5))
        await asyncio.sleep(0)
        oldest = lead.oldest_waiting()
        assert oldest is not None and oldest[1] == lead.held_since_ms, "the refused writes waited since then"
        assert stalling(lead.isr, 1, lead.followers, oldest, oldest[1] + 100, 100, 2) == [3]
        lead.update(_state((1, 2), replicas=(2, 1, 3)), 2)
        assert lead.held_since_ms is None, "the ISR changed: judged afresh"
        await asyncio.wait_for(waiting, 1)
    finally:
        await manager.close()
        replica.log.close()


@pytest.mark.asyncio
async def test_no_hand_over_begins_while_a_write_waits_on_a_follower_that_still_looks_fresh(tmp_path, pool):
    """Node 3 answered 300 ms ago (fresh enough for a hand-over) but has not taken the write that
    has waited since: it may have just stopped. A hand-over begun now would refuse writes until
    given up; none begins, and the stall rule deals with node 3 first (decision 0409)."""
    _, manager, replica, lead = _leading_with_live_followers(tmp_path, pool, replicas=(2, 1, 3))
    try:
        info = replica.append(batch_of([b"a", b"b"]))
        await replica.commit(info)
        lead.followers[3].log_end = 1
        lead.followers[2].high_watermark_sent = lead.followers[3].high_watermark_sent = 1
        waiting = asyncio.ensure_future(lead.wait_committed(info.log_end_offset, 5))
        await asyncio.sleep(0.25)  # the write has waited past a healthy round trip (HAND_OVER_WAITING_MAX_MS)
        at = now_ms()
        lead.followers[2].log_end, lead.followers[2].answered_ms = 2, at
        lead.followers[3].answered_ms = at - 300  # just before the write came
        manager._begin_failback(lead, 2, at, 500)
        await asyncio.sleep(0.02)
        assert not lead.handing_over and lead.held_since_ms is None, "writes go on; no hand-over"
        lead.followers[3].log_end, lead.followers[3].answered_ms = 2, now_ms()  # it answers after all
        lead.recompute()
        await asyncio.wait_for(waiting, 1)
        manager._begin_failback(lead, 2, now_ms(), 500)
        await asyncio.sleep(0)
        assert lead.handing_over, "nothing waits and every member answered just now: it begins"
    finally:
        await manager.close()
        replica.log.close()


@pytest.mark.asyncio
async def test_the_upkeep_round_comes_when_a_silent_followers_stall_time_is_up(tmp_path, pool):
    """The ISR upkeep runs every ``TICK_S``; when a follower silent under a waiting write will be
    due for the stall rule before that, the next round comes at its time instead, so the writes
    it holds wait ``replica_stall_ms``, not up to a round more."""
    members, manager, replica, lead = _leading_with_live_followers(tmp_path, pool, replicas=(1, 2, 3))
    try:
        info = replica.append(batch_of([b"a"]))
        await replica.commit(info)
        stall_ms = NodeConfig(node_id=1).replica_stall_ms
        at = now_ms()
        lead.followers[2].log_end, lead.followers[2].answered_ms = 1, at
        lead.followers[3].log_end, lead.followers[3].answered_ms = 0, at - stall_ms + 60  # silent: due in 60 ms
        lead.held_since_ms = at - stall_ms  # the write counts as waiting since then
        waiting = asyncio.ensure_future(lead.wait_committed(info.log_end_offset, 5))
        await asyncio.sleep(0)
        manager.next_round_s = 0.0  # this round at once
        await manager.tick()
        assert members.isr_changes == [] and 0 < manager.next_round_s < TICK_S / 2, manager.next_round_s
        await manager.tick()
        await asyncio.sleep(0)
        assert members.isr_changes == [(1, 2)], "node 3 leaves at its time"
        await asyncio.wait_for(waiting, 1)
        assert manager.next_round_s == TICK_S, "nothing is due: the round keeps its pace"
    finally:
        await manager.close()
        replica.log.close()
