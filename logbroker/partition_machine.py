"""One partition's replication state as a pure state machine (decision 0340): ``step(state,
event, now_ms) -> (state, effects)`` over its role, ISR, phase and offsets, and ``check_append``,
the one gate a write passes before it is appended.

No I/O, no asyncio, no clock: the shell turns what happens (a leadership taken up, a follower's
answer, a coordinator transaction's outcome, a move's freeze) into events, and applies the
effects (ship, write the ISR to the coordinator, expose records, acknowledge or fail ``acks=all`` waiters).
The rules are ``partition_state``'s; trace tests (``tests/logbroker/partition_traces/``), a
Hypothesis model (``tests/logbroker/test_partition_machine.py``) and a comparison with the live
``Leadership`` (``test_partition_machine_vs_leadership.py``) check them.

Invariants every step keeps:
- ``high_watermark <= log_end``, and a leader's high watermark never goes back while it leads;
- the high watermark is at most the least log end over ``committed + expanding`` (a member being
  dropped still counts until the coordinator has the smaller ISR), and it moves only while the
  lease is proven (``now_ms < lease_until_ms``: DESIGN §5 fencing);
- an ``acks=all`` write is acknowledged only once the high watermark passes it with at least
  ``min_insync`` committed members, so every committed member holds it; it fails with
  ``not_enough_replicas`` when the committed ISR is too small by then, with ``not_leader`` when
  the leadership ends first;
- while the coordinator names eligible leader replicas (``Isr.eligible``, decision 0385: members
  dropped with the ISR left under ``min_insync``) the high watermark does not move, so each of
  them holds everything below it, and every waiting ``acks=all`` write fails with
  ``not_enough_replicas``;
- at most one ISR change is in flight (``Isr.changing``); ``shrinking`` lies within ``committed``
  and ``expanding`` outside it;
- a shipment from an epoch older than the newest one known is refused.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import msgspec

from coordinator.eligibility import after_isr_change
from logbroker.errors import BrokerError, NotAvailableError, NotEnoughReplicasError, NotLeaderError

ACK_WAITERS_MAX: Final = 100_000  # acks=all writes waiting, per partition
LEASE_FOREVER_MS: Final = 2**62  # a single node: nothing can take its leadership
NO_EPOCH: Final = -1


class Phase(enum.Enum):
    SERVING = "serving"
    FROZEN = "frozen"  # a move waits for the tail to commit before the hand-over (until ``frozen_until_ms``)
    HANDING_OVER = "handing_over"  # failback: the preferred replica takes the whole log, then we resign
    DRAINING = "draining"  # a clean stop: the followers take the whole log


class Follower(msgspec.Struct, frozen=True):
    epoch: int  # the newest leader epoch known (from the coordinator or a shipment)


class Leader(msgspec.Struct, frozen=True):
    epoch: int


Role = Follower | Leader


class Isr(msgspec.Struct, frozen=True):
    """The ISR as the coordinator holds it (``committed``, with its eligible leader replicas
    ``eligible``) and the one change in flight."""

    committed: tuple[int, ...]
    expanding: tuple[int, ...] = ()
    shrinking: tuple[int, ...] = ()
    eligible: tuple[int, ...] = ()

    @property
    def counted(self) -> tuple[int, ...]:
        """The members the high watermark waits for: joining ones at once, leaving ones until committed."""
        return self.committed + tuple(n for n in self.expanding if n not in self.committed)

    @property
    def changing(self) -> bool:
        return bool(self.expanding or self.shrinking)


class PartitionState(msgspec.Struct, frozen=True):
    topic: str
    partition: int
    me: int
    role: Role = Follower(NO_EPOCH)
    replicas: tuple[int, ...] = ()
    isr: Isr = Isr(())
    min_insync: int = 1
    phase: Phase = Phase.SERVING
    frozen_until_ms: int = 0
    high_watermark: int = 0
    log_end: int = 0
    epoch_start: int = 0  # the log end when this leadership began
    followers: tuple[tuple[int, int], ...] = ()  # (node, known log end) pairs; absent: not known yet
    # The ends of the acks=all writes waiting, in arrival order (``step`` keeps a tuple; the shell
    # may hand the gate a read-only view of its own list: the gate reads only its length).
    waiting: Sequence[int] = ()
    lease_until_ms: int = 0

    def follower_end(self, node: int) -> int | None:
        for known, end in self.followers:
            if known == node:
                return end
        return None

    @property
    def leads(self) -> bool:
        return isinstance(self.role, Leader)

    @property
    def epoch(self) -> int:
        return self.role.epoch


def solo(topic: str, partition: int, me: int, log_end: int) -> PartitionState:
    """A single node's partition: a one-member cluster that always leads."""
    return PartitionState(topic, partition, me, Leader(0), (me,), Isr((me,)), 1, high_watermark=log_end,
                          log_end=log_end, epoch_start=log_end, lease_until_ms=LEASE_FOREVER_MS)


def ms_of(seconds: float, *, up: bool = False) -> int:
    """A ``time.monotonic()`` instant in whole ms on this module's clock (``LEASE_FOREVER_MS`` for
    an infinite one): rounded down, or ``up``; a lease rounded down and a freeze rounded up err
    towards refusing a write."""
    if math.isinf(seconds):
        return LEASE_FOREVER_MS if seconds > 0 else -LEASE_FOREVER_MS
    return math.ceil(seconds * 1000) if up else math.floor(seconds * 1000)


# ---- events ---------------------------------------------------------------------------------

class BecameLeader(msgspec.Struct, frozen=True):
    epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync: int
    lease_until_ms: int
    elr: tuple[int, ...] = ()


class BecameFollower(msgspec.Struct, frozen=True):
    epoch: int


class LeaseRenewed(msgspec.Struct, frozen=True):
    until_ms: int


class Reassigned(msgspec.Struct, frozen=True):
    """The coordinator changed the replica list or the topic's ``min_insync_replicas`` (same epoch)."""

    replicas: tuple[int, ...]
    min_insync: int


class Appended(msgspec.Struct, frozen=True):
    """The leader appended records up to ``end`` (what it holds as its flush policy wants)."""

    end: int
    acks: Literal["0", "1", "all"]


class FollowerFetched(msgspec.Struct, frozen=True):
    """A follower answered a shipment: it holds everything below ``end``."""

    node: int
    end: int


class FollowerLagged(msgspec.Struct, frozen=True):
    """The shell's lag rules (``partition_state.out_of_sync``, ``stalling``) want ``node`` out."""

    node: int


class IsrCommitted(msgspec.Struct, frozen=True):
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


class IsrFailed(msgspec.Struct, frozen=True):
    """The ISR transaction failed (the coordinator is unavailable): nothing changed; retried."""


class Shipment(msgspec.Struct, frozen=True):
    """A follower applied a shipment of leader ``epoch``: its log now ends at ``end`` (lower than
    before when it cut a divergent suffix); the leader's high watermark was ``leader_hw``."""

    epoch: int
    end: int
    leader_hw: int


class Freeze(msgspec.Struct, frozen=True):
    until_ms: int


class Thaw(msgspec.Struct, frozen=True):
    pass


class HandOver(msgspec.Struct, frozen=True):
    pass


class HandOverEnded(msgspec.Struct, frozen=True):
    pass


class Drain(msgspec.Struct, frozen=True):
    pass


Event = (BecameLeader | BecameFollower | LeaseRenewed | Reassigned | Appended | FollowerFetched | FollowerLagged
         | IsrCommitted | IsrFailed | Shipment | Freeze | Thaw | HandOver | HandOverEnded | Drain)


# ---- effects --------------------------------------------------------------------------------

class Ship(msgspec.Struct, frozen=True):
    followers: tuple[int, ...]


class WriteIsr(msgspec.Struct, frozen=True):
    """A coordinator transaction guarded by the leader epoch; its outcome comes back as
    ``IsrCommitted`` or ``IsrFailed`` (a stale epoch: ``BecameFollower``)."""

    epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()


class Expose(msgspec.Struct, frozen=True):
    """Readers may see records below ``high_watermark`` (wake the waiting fetches)."""

    high_watermark: int


class Acknowledge(msgspec.Struct, frozen=True):
    """Every ``acks=all`` write waiting with an end at most ``up_to`` succeeds."""

    up_to: int


class FailWaiters(msgspec.Struct, frozen=True):
    """Every ``acks=all`` write waiting with an end at most ``up_to`` fails with ``code``."""

    up_to: int
    code: Literal["not_leader", "not_enough_replicas"]


class AppendCopied(msgspec.Struct, frozen=True):
    end: int


class RefuseShipment(msgspec.Struct, frozen=True):
    known_epoch: int


Effect = Ship | WriteIsr | Expose | Acknowledge | FailWaiters | AppendCopied | RefuseShipment
EVERY_WAITER: Final = 2**62


# ---- the write gate -------------------------------------------------------------------------

def check_append(state: PartitionState, acks: str, now_ms: int) -> BrokerError | None:
    """The error a write to this partition meets now, or None: it may be appended. Nothing is
    stored when it refuses. ``now_ms`` on the clock of ``lease_until_ms`` and ``frozen_until_ms``
    (a lease and a freeze lapse by themselves)."""
    if now_ms >= state.lease_until_ms and state.leads:
        return NotLeaderError("this node cannot prove its leadership now (its coordinator session may have "
                              "lapsed); retry: the partition's leader answers")
    if state.phase is Phase.FROZEN and now_ms < state.frozen_until_ms:
        return NotLeaderError(f"{_where(state)} is moving to another node; retry shortly")
    if not state.leads:
        return NotLeaderError(f"node {state.me} does not lead {_where(state)} now (it may be taking it up); retry")
    if state.phase in (Phase.HANDING_OVER, Phase.DRAINING):
        return NotLeaderError(f"{_where(state)} is changing leader; retry")
    if acks == "all":
        isr = len(state.isr.committed)
        if isr < state.min_insync:
            return NotEnoughReplicasError(
                f"{isr} in-sync replica(s) of {_where(state)}, fewer than min_insync_replicas={state.min_insync}; "
                "nothing was stored", isr=isr, min_insync_replicas=state.min_insync)
        if len(state.waiting) >= ACK_WAITERS_MAX:
            return NotAvailableError(f"{len(state.waiting)} acks=all writes already wait on this partition")
    return None


def _where(state: PartitionState) -> str:
    return f"partition {state.partition} of {state.topic!r}"


# ---- transitions ----------------------------------------------------------------------------

def step(state: PartitionState, event: Event, now_ms: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    """Apply ``event`` at ``now_ms``; the new state and what the shell must do, in order."""
    match event:
        case BecameLeader():
            return _become_leader(state, event, now_ms)
        case BecameFollower(epoch=epoch):
            if epoch < state.epoch or (epoch == state.epoch and not state.leads):
                return state, ()
            return _step_down(state, epoch)
        case LeaseRenewed(until_ms=until):
            return _advance(msgspec.structs.replace(state, lease_until_ms=max(state.lease_until_ms, until)), now_ms)
        case Reassigned():
            return _reassign(state, event, now_ms)
        case Appended(end=end, acks=acks):
            return _appended(state, end, acks, now_ms)
        case FollowerFetched(node=node, end=end):
            return _fetched(state, node, end, now_ms)
        case FollowerLagged(node=node):
            if not state.leads or state.isr.changing or node == state.me or node not in state.isr.committed:
                return state, ()
            isr, elr = after_isr_change(state.replicas, state.isr.committed, state.isr.eligible, (node,), (),
                                        state.me, state.min_insync)
            return (msgspec.structs.replace(state, isr=_settled(state.isr, shrinking=(node,))),
                    (WriteIsr(state.epoch, isr, elr),))
        case IsrCommitted(isr=isr, elr=elr):
            if not state.leads:
                return state, ()
            return _advance(msgspec.structs.replace(state, isr=Isr(tuple(isr), eligible=tuple(elr))), now_ms)
        case IsrFailed():
            return msgspec.structs.replace(state, isr=_settled(state.isr)), ()
        case Shipment():
            return _shipment(state, event)
        case Freeze(until_ms=until):
            if not state.leads or state.phase not in (Phase.SERVING, Phase.FROZEN):
                return state, ()
            return msgspec.structs.replace(state, phase=Phase.FROZEN, frozen_until_ms=until), ()
        case Thaw():
            return _set_phase(state, Phase.SERVING, (Phase.FROZEN,)), ()
        case HandOver():
            return _set_phase(state, Phase.HANDING_OVER, (Phase.SERVING, Phase.FROZEN)), ()
        case HandOverEnded():
            return _set_phase(state, Phase.SERVING, (Phase.HANDING_OVER,)), ()
        case Drain():
            followers = _followers(state)
            drained = _set_phase(state, Phase.DRAINING, tuple(Phase))
            return drained, ((Ship(followers),) if state.leads and followers else ())
    raise TypeError(f"not a partition event: {event!r}")


def _settled(isr: Isr, *, expanding: tuple[int, ...] = (), shrinking: tuple[int, ...] = ()) -> Isr:
    """The committed ISR and ELR with ``expanding`` or ``shrinking`` as the change in flight."""
    return Isr(isr.committed, expanding, shrinking, isr.eligible)


def _set_phase(state: PartitionState, phase: Phase, allowed_from: tuple[Phase, ...]) -> PartitionState:
    if not state.leads or state.phase not in allowed_from:
        return state
    return msgspec.structs.replace(state, phase=phase)


def _followers(state: PartitionState) -> tuple[int, ...]:
    return tuple(n for n in state.replicas if n != state.me)


def _become_leader(state: PartitionState, event: BecameLeader,
                   now_ms: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    if event.epoch <= state.epoch:
        return state, ()  # an older view, or the leadership this node holds already
    led = msgspec.structs.replace(
        state, role=Leader(event.epoch), replicas=tuple(event.replicas),
        isr=Isr(tuple(event.isr), eligible=tuple(event.elr)),
        min_insync=event.min_insync, phase=Phase.SERVING, frozen_until_ms=0, epoch_start=state.log_end,
        followers=(), waiting=(), lease_until_ms=event.lease_until_ms)
    followers = _followers(led)
    led, effects = _advance(led, now_ms)
    return led, ((Ship(followers),) if followers else ()) + effects


def _step_down(state: PartitionState, epoch: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    effects: tuple[Effect, ...] = (FailWaiters(EVERY_WAITER, "not_leader"),) if state.waiting else ()
    return msgspec.structs.replace(state, role=Follower(epoch), isr=_settled(state.isr), phase=Phase.SERVING,
                               frozen_until_ms=0, followers=(), waiting=()), effects


def _reassign(state: PartitionState, event: Reassigned, now_ms: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    if not state.leads:
        return state, ()
    known = tuple((n, end) for n, end in state.followers if n in event.replicas)
    moved = msgspec.structs.replace(state, replicas=tuple(event.replicas), min_insync=event.min_insync, followers=known)
    new = tuple(n for n in _followers(moved) if n not in _followers(state))
    moved, effects = _advance(moved, now_ms)
    return moved, ((Ship(new),) if new else ()) + effects


def _appended(state: PartitionState, end: int, acks: str, now_ms: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    if not state.leads:  # the leadership ended between the append and this event
        return state, ((FailWaiters(end, "not_leader"),) if acks == "all" else ())
    waiting = (*state.waiting, end) if acks == "all" else state.waiting
    grown = msgspec.structs.replace(state, log_end=max(state.log_end, end), waiting=waiting)
    followers = _followers(grown)
    grown, effects = _advance(grown, now_ms)
    return grown, ((Ship(followers),) if followers else ()) + effects


def _fetched(state: PartitionState, node: int, end: int, now_ms: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    if not state.leads or node == state.me or node not in state.replicas:
        return state, ()
    end = min(end, state.log_end)  # a follower's longer tail is divergent: the next align entry cuts it
    followers = tuple(sorted({**dict(state.followers), node: end}.items()))
    fetched = msgspec.structs.replace(state, followers=followers)
    effects: tuple[Effect, ...] = ()
    joins = (node not in fetched.isr.counted and not fetched.isr.changing
             and end >= max(fetched.high_watermark, fetched.epoch_start))
    if joins:
        isr, elr = after_isr_change(fetched.replicas, fetched.isr.committed, fetched.isr.eligible, (), (node,),
                                    fetched.me, fetched.min_insync)
        fetched = msgspec.structs.replace(fetched, isr=_settled(fetched.isr, expanding=(node,)))
        effects = (WriteIsr(fetched.epoch, isr, elr),)
    fetched, more = _advance(fetched, now_ms)
    return fetched, effects + more


def _shipment(state: PartitionState, event: Shipment) -> tuple[PartitionState, tuple[Effect, ...]]:
    effects: tuple[Effect, ...] = ()
    if event.epoch < state.epoch or (state.leads and event.epoch == state.epoch):
        return state, (RefuseShipment(state.epoch),)
    if state.leads:  # a newer leader ships here: this leadership is over
        state, effects = _step_down(state, event.epoch)
    hw = min(max(state.high_watermark, event.leader_hw), event.end)
    moved = msgspec.structs.replace(state, role=Follower(event.epoch), log_end=event.end, high_watermark=hw)
    effects += (AppendCopied(event.end),)
    if hw != state.high_watermark:
        effects += (Expose(hw),)
    return moved, effects


def _advance(state: PartitionState, now_ms: int) -> tuple[PartitionState, tuple[Effect, ...]]:
    """Move the high watermark to the least log end over the counted ISR (never back, only while
    the lease is proven, not while eligible leader replicas are named) and acknowledge the
    ``acks=all`` writes it passed."""
    if not state.leads or now_ms >= state.lease_until_ms:
        return state, ()
    if state.isr.eligible:
        if not state.waiting or len(state.isr.committed) >= state.min_insync:
            return state, ()
        return (msgspec.structs.replace(state, waiting=()),
                (FailWaiters(EVERY_WAITER, "not_enough_replicas"),))
    ends = [state.follower_end(node) for node in state.isr.counted if node != state.me]
    known = [end for end in ends if end is not None]
    low = min([state.log_end, *known]) if len(known) == len(ends) else None  # one not known yet: hold it
    effects: list[Effect] = []
    hw = state.high_watermark
    if low is not None and low > hw:
        hw = low
        effects.append(Expose(hw))
    released = [end for end in state.waiting if end <= hw]
    if released:
        if len(state.isr.committed) >= state.min_insync:
            effects.append(Acknowledge(hw))
        else:
            effects.append(FailWaiters(hw, "not_enough_replicas"))
    waiting = tuple(end for end in state.waiting if end > hw)
    return msgspec.structs.replace(state, high_watermark=hw, waiting=waiting), tuple(effects)


def run(state: PartitionState, events: Iterable[tuple[int, Event]]) -> tuple[PartitionState, list[Effect]]:
    """Apply ``(now_ms, event)`` pairs in order; the final state and every effect."""
    effects: list[Effect] = []
    for now_ms, event in events:
        state, more = step(state, event, now_ms)
        effects.extend(more)
    return state, effects
