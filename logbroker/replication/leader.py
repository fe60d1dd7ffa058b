"""One partition this node leads, at one leader epoch: its followers' progress, its ISR as the
coordinator holds it, its high watermark, and the ``acks=all`` writes waiting for it.

The rules are ``logbroker.partition_state``'s; this class applies them to a ``Replica``:
- the high watermark moves (``recompute``) only while the node can prove its leadership (its
  lease has not possibly lapsed: DESIGN §5 fencing), so a leader resumed from a pause
  acknowledges nothing its successor may lack;
- an ``acks=all`` write is released once the high watermark passes it with at least
  ``min_insync_replicas`` in the ISR; it fails with ``not_enough_replicas`` once the ISR is
  smaller (at once while the high watermark holds for the ELR), with ``not_leader`` when the leadership ends
  first, with ``replication_timeout`` when the wait outlasts its bound; the oldest one waiting
  (``oldest_waiting``) tells the ISR upkeep which followers stall writes;
- ``isr`` is the coordinator's; a follower joining counts towards the high watermark at once (it
  holds everything already), one leaving only once the coordinator has the smaller ISR;
- while the coordinator names eligible leader replicas (``elr``: followers dropped with the ISR
  left under ``min_insync_replicas``) the high watermark stays where it is, so that each of them
  still holds everything below it and may lead without losing a visible record (decision 0385);
- ``machine_state`` is this leadership as ``partition_machine`` states a partition: the node's
  one write gate (``check_append``, decision 0340) reads it.

Everything runs on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Final, overload

from coordinator.models import PartitionState
from logbroker.errors import NotEnoughReplicasError, NotLeaderError, ReplicationTimeoutError
from logbroker.partition_machine import Follower, Isr, Leader, Phase
from logbroker.partition_machine import PartitionState as MachineState
from logbroker.partition_state import UNKNOWN, FollowerProgress, high_watermark
from logbroker.replica_manager import Replica

SHARED_READ_BYTES_MAX: Final = 256 * 1024  # a read kept for the other followers, per partition


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Leadership:
    def __init__(self, replica: Replica, state: PartitionState, me: int, min_insync: int,
                 fenced: Callable[[], bool]) -> None:
        self.replica = replica
        replica.local_end = replica.log.log_end_offset  # what this node holds now counts as its own
        replica.dedup = None  # rebuilt from the log: it took the last leader's writes as a follower
        self.me = me
        self.epoch = state.leader_epoch
        self._role = Leader(self.epoch)
        self.replicas = state.replicas
        self.isr = state.isr
        self.elr = state.elr
        self.joining: tuple[int, ...] = ()  # decided to join; counted before the coordinator has them
        self.min_insync = min_insync
        self.epoch_start = replica.log.log_end_offset
        # The last read for a shipment: (start, byte bound, log end then, first offset, bytes),
        # and how many more followers may take it.
        self._last_read: tuple[int, int, int, int, bytes] | None = None
        self._readers_left = 0
        start = now_ms()
        self.followers = {n: FollowerProgress(caught_up_ms=start) for n in state.replicas if n != me}
        self.isr_changing = False
        self.handing_over = False
        self.held_since_ms: int | None = None  # a hand-over given up refused writes since then
        self.closed = False
        self._fenced = fenced
        self._acks: list[tuple[int, asyncio.Future[None], int]] = []  # end, waiter, since (ms)

    @property
    def key(self) -> tuple[str, int]:
        return self.replica.topic, self.replica.partition

    def update(self, state: PartitionState, min_insync: int) -> None:
        """The coordinator's view of this partition at the same epoch (an ISR change committed,
        a reassignment): adopt it."""
        self.replicas = state.replicas
        self.isr = state.isr
        self.elr = state.elr
        self.joining = tuple(n for n in self.joining if n not in state.isr)
        self.min_insync = min_insync
        self.held_since_ms = None  # the ISR changed: its members are judged afresh
        start = now_ms()
        for node in state.replicas:
            if node != self.me and node not in self.followers:
                self.followers[node] = FollowerProgress(caught_up_ms=start)
        for node in [n for n in self.followers if n not in state.replicas]:
            del self.followers[node]
        self.recompute()

    def shipment(self, start: int, max_bytes: int) -> tuple[int, bytes]:
        """Whole batches from ``start`` for a follower (first offset, bytes). Followers that ask
        for the same range while the log has not grown share one read (a leader's log only
        grows while it leads, so equal bounds mean equal bytes); the shared copy is kept until
        the others took it, and only when small (``SHARED_READ_BYTES_MAX``)."""
        end = self.replica.log.log_end_offset
        last = self._last_read
        if last is not None and last[0] == start and last[1] == max_bytes and last[2] == end:
            self._readers_left -= 1
            if self._readers_left <= 0:
                self._last_read = None
            return last[3], last[4]
        read = self.replica.log.read(start, max_bytes)
        data = bytes(read.data)
        self._readers_left = len(self.followers) - 1
        shared = self._readers_left > 0 and len(data) <= SHARED_READ_BYTES_MAX
        self._last_read = (start, max_bytes, end, read.first_offset, data) if shared else None
        return read.first_offset, data

    def machine_state(self, lease_until_ms: int, frozen_until_ms: int | None = None) -> MachineState:
        """This leadership as ``partition_machine`` holds a partition: what the write gate
        (``check_append``) reads. ``frozen_until_ms``: a move's freeze that has not lapsed."""
        if frozen_until_ms is not None:
            phase = Phase.FROZEN
        elif self.handing_over:
            phase = Phase.HANDING_OVER
        else:
            phase = Phase.SERVING
        role = Follower(self.epoch) if self.closed else self._role
        known = tuple((n, p.log_end) for n, p in self.followers.items() if p.log_end is not None)
        waiting = _WaitingEnds(self._acks)  # a done one holds its slot until released
        expanding = tuple(n for n in self.joining if n not in self.isr) if self.joining else ()
        return MachineState(self.replica.topic, self.replica.partition, self.me, role, self.replicas,
                            Isr(self.isr, expanding, eligible=self.elr), self.min_insync, phase,
                            0 if frozen_until_ms is None else frozen_until_ms, self.replica.high_watermark,
                            self.replica.local_end, self.epoch_start, known, waiting, lease_until_ms)

    def counted_isr(self) -> tuple[int, ...]:
        return self.isr + tuple(n for n in self.joining if n not in self.isr)

    def recompute(self) -> None:
        """Move the high watermark to the least log end over the ISR and release what it passed."""
        if self.closed or self._fenced():
            return
        low = high_watermark(self.me, self.replica.local_end, self.counted_isr(), self.followers)
        if low != UNKNOWN and not self.elr:
            self.replica.advance(low)
        self._release()

    def _release(self) -> None:
        if not self._acks:
            return
        hwm = self.replica.high_watermark
        too_few = len(self.isr) < self.min_insync  # the ISR the coordinator holds
        waiting = []
        for end, future, since in self._acks:
            if future.done():
                continue
            if end > hwm and not (too_few and self.elr):  # the high watermark holds while the ELR is named
                waiting.append((end, future, since))
            elif too_few:
                future.set_exception(NotEnoughReplicasError(
                    f"the ISR shrank below min_insync_replicas={self.min_insync} while the write waited; it is "
                    "stored on the leader and may be visible", isr=len(self.isr),
                    min_insync_replicas=self.min_insync))
            else:
                future.set_result(None)
        self._acks = waiting

    async def wait_committed(self, end: int, timeout_s: float) -> None:
        """``acks=all``: return once every record below ``end`` is below the high watermark."""
        self.recompute()
        if self.replica.high_watermark >= end and len(self.isr) >= self.min_insync:
            return
        if self.closed:
            raise NotLeaderError(f"node {self.me} no longer leads partition {self.replica.partition} of "
                                 f"{self.replica.topic!r}; the write's outcome is not known here")
        if self.elr and len(self.isr) < self.min_insync:
            raise NotEnoughReplicasError(
                f"the ISR is below min_insync_replicas={self.min_insync}; the write is stored on the leader and may "
                "become visible", isr=len(self.isr), min_insync_replicas=self.min_insync)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._acks.append((end, future, now_ms()))
        try:
            async with asyncio.timeout(timeout_s):
                await future
        except TimeoutError:
            raise ReplicationTimeoutError(
                f"the followers did not confirm the write within {timeout_s:g} s; it is stored on the leader "
                "and may still become visible") from None
        finally:
            if not future.done():
                future.cancel()

    def oldest_waiting(self) -> tuple[int, int] | None:
        """``(end, since_ms)`` of the ``acks=all`` write that has waited longest, None when none
        waits. Writes a hand-over refused before it was given up (``held_since_ms``) count as
        waiting from then: the writers were held as long, and retried."""
        for end, future, since in self._acks:
            if not future.done():
                held = self.held_since_ms
                return end, since if held is None else min(since, held)
        self.held_since_ms = None  # nothing waits: the writes held back have gone through
        return None

    def close(self, reason: str) -> None:
        """The leadership ended (another node leads, or the partition left this node): every
        waiting ``acks=all`` write fails with ``not_leader``."""
        self.closed = True
        self.replica.leader_hook = None
        self.replica.ack_wait = None
        acks, self._acks = self._acks, []
        for _, future, _ in acks:
            if not future.done():
                future.set_exception(NotLeaderError(
                    f"node {self.me} stopped leading partition {self.replica.partition} of {self.replica.topic!r} "
                    f"({reason}) before the write was confirmed; it may or may not be kept"))


class _WaitingEnds(Sequence[int]):
    """The ends of a leadership's ``acks=all`` waiters as a read-only view, so that the write gate
    (which reads only how many wait) costs no copy of up to ``ACK_WAITERS_MAX`` of them."""

    __slots__ = ("_acks",)

    def __init__(self, acks: list[tuple[int, asyncio.Future[None], int]]) -> None:
        self._acks = acks

    def __len__(self) -> int:
        return len(self._acks)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return tuple(end for end, _, _ in self._acks[index])
        return self._acks[index][0]
