"""Per-message state of one queue partition (pure: the clock is an argument, no I/O).

Each offset moves ``available -> leased -> (acked | available again | dead)``:

- ``acquire`` leases up to ``n`` available offsets (redeliveries first, in offset order, then new
  ones up to the high watermark) to one receive, under a fresh nonzero ``token``, until
  ``now + visibility``; each lease adds one to the offset's delivery count;
- ``ack(offset, token, now)`` finishes a message whose current lease has that token and has not
  run out at ``now`` (a receipt of an expired lease is refused: the message may be leased to
  another receiver, ``lease_expired`` tells the two refusals apart);
- ``nack(offset, token, now, delay)`` makes it available again after ``delay`` (the receipt is
  spent), under the same rule;
- ``withdraw(offsets, token)`` undoes a lease the receive never handed out (its lease event did
  not become durable, or the receive was cancelled): the messages are available again at once and
  that delivery is not counted, so a failing state log never dead-letters a message nobody got;
- a lease that expires makes the message available again, unless its delivery count reached
  ``max_deliveries``: then (as for a nack at that count) it is handed over for the dead-letter
  topic (``take_dead``) and finished once ``dead_lettered`` confirms it.

Invariants (checked by a Hypothesis state machine): an offset is leased to at most one token at a
time; an acked or dead-lettered offset is never delivered again; delivery counts never exceed
``max_deliveries``; offsets below ``done_below`` are all finished. The window of unfinished offsets
``[done_below, next_offset)`` is capped at ``window_max`` (no new messages beyond it).

Every transition is also an event (``L``/``A``/``N``/``D``/``W``) that ``apply`` replays without
checks, so state rebuilt from the event log equals the state that wrote it; an ``S`` event
(``snapshot_event``) stands for the whole state, so the events before it can be deleted.
"""

from __future__ import annotations

import heapq
from typing import Any, Final

AVAILABLE: Final = 0
LEASED: Final = 1
DELAYED: Final = 2
DEAD: Final = 3
WINDOW_MAX_DEFAULT: Final = 100_000


class Entry:
    __slots__ = ("count", "state", "token", "until_ms")

    def __init__(self) -> None:
        self.state = AVAILABLE
        self.count = 0
        self.token = 0
        self.until_ms = 0


class PartitionShare:
    __slots__ = ("_dead", "_ready", "_seq", "_timers", "done_below", "entries", "max_deliveries", "next_offset",
                 "window_max")

    def __init__(self, max_deliveries: int, *, window_max: int = WINDOW_MAX_DEFAULT) -> None:
        assert max_deliveries >= 1 and window_max >= 1
        self.max_deliveries = max_deliveries
        self.window_max = window_max
        self.done_below = 0
        self.next_offset = 0
        self.entries: dict[int, Entry] = {}
        self._ready: list[int] = []  # heap of offsets that may be available (checked when popped)
        self._timers: list[tuple[int, int, int, list[int]]] = []  # (until_ms, seq, token, offsets)
        self._seq = 0
        self._dead: list[int] = []

    # ---- queries -------------------------------------------------------------------------------

    def in_flight(self) -> int:
        return sum(1 for e in self.entries.values() if e.state == LEASED)

    def next_deadline(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def _window_room(self) -> int:
        return self.window_max - (self.next_offset - self.done_below)

    # ---- transitions ---------------------------------------------------------------------------

    def expire(self, now_ms: int) -> None:
        """Process leases and nack delays that are due at ``now_ms``."""
        while self._timers and self._timers[0][0] <= now_ms:
            until, _, token, offsets = heapq.heappop(self._timers)
            for offset in offsets:
                entry = self.entries.get(offset)
                if entry is None or entry.token != token or entry.until_ms != until \
                        or entry.state not in (LEASED, DELAYED):
                    continue
                self._release(offset, entry)

    def _release(self, offset: int, entry: Entry) -> None:
        if entry.count >= self.max_deliveries:
            entry.state = DEAD
            self._dead.append(offset)
        else:
            entry.state = AVAILABLE
            heapq.heappush(self._ready, offset)

    def acquire(self, now_ms: int, n: int, visibility_ms: int, high_watermark: int, token: int) -> list[int]:
        """Lease up to ``n`` offsets to ``token``; returns them in offset order. The caller records
        the ``L`` event ``lease_event(...)`` of the result."""
        assert token != 0 and n >= 0 and visibility_ms > 0
        self.expire(now_ms)
        chosen: list[int] = []
        while self._ready and len(chosen) < n:
            offset = heapq.heappop(self._ready)
            entry = self.entries.get(offset)
            if entry is not None and entry.state == AVAILABLE and (not chosen or chosen[-1] != offset):
                chosen.append(offset)
        fresh_end = min(high_watermark, self.next_offset + n - len(chosen), self.next_offset + self._window_room())
        chosen.extend(range(self.next_offset, max(self.next_offset, fresh_end)))
        if chosen:
            self._lease(chosen, token, now_ms + visibility_ms)
        return chosen

    def _lease(self, offsets: list[int], token: int, until_ms: int) -> None:
        for offset in offsets:
            if offset < self.done_below:
                continue
            while self.next_offset <= offset:
                self.entries[self.next_offset] = Entry()
                if self.next_offset != offset:  # a gap: no recorded lease took it (one was lost unrecorded)
                    heapq.heappush(self._ready, self.next_offset)
                self.next_offset += 1
            entry = self.entries.get(offset)
            if entry is None:
                continue
            entry.state, entry.token, entry.until_ms = LEASED, token, until_ms
            entry.count += 1
        self._seq += 1
        heapq.heappush(self._timers, (until_ms, self._seq, token, offsets))

    def withdraw(self, offsets: list[int], token: int) -> None:
        """Undo ``token``'s lease of ``offsets`` (those it still holds): the receive that took them
        failed before a client got them. The caller records ``withdraw_event(token, offsets)``."""
        for offset in offsets:
            entry = self.entries.get(offset)
            if entry is not None and entry.state == LEASED and entry.token == token:
                entry.count -= 1
                self._release(offset, entry)

    def _held(self, offset: int, token: int, now_ms: int) -> Entry | None:
        """The entry of ``offset`` if ``token`` holds its lease and the lease is still running."""
        entry = self.entries.get(offset)
        if entry is None or token == 0 or entry.token != token or entry.state != LEASED or entry.until_ms <= now_ms:
            return None
        return entry

    def lease_expired(self, offset: int, token: int, now_ms: int) -> bool:
        """True when ``token`` was the last lease of ``offset`` but ran out by ``now_ms``."""
        entry = self.entries.get(offset)
        return entry is not None and token != 0 and entry.token == token and entry.state != DEAD \
            and self._held(offset, token, now_ms) is None

    def ack(self, offset: int, token: int, now_ms: int) -> bool:
        """Finish ``offset`` if ``token`` holds its running lease; False for an expired, stale or
        forged receipt."""
        if self._held(offset, token, now_ms) is None:
            return False
        self._finish(offset)
        return True

    def nack(self, offset: int, token: int, now_ms: int, delay_ms: int) -> bool:
        """Give the message back (available after ``delay_ms``); False for an expired, stale or
        forged receipt."""
        entry = self._held(offset, token, now_ms)
        if entry is None:
            return False
        self._nack(offset, entry, now_ms + delay_ms if delay_ms > 0 else 0)
        return True

    def _nack(self, offset: int, entry: Entry, until_ms: int) -> None:
        entry.token = 0
        if until_ms > 0 and entry.count < self.max_deliveries:
            entry.state, entry.until_ms = DELAYED, until_ms
            self._seq += 1
            heapq.heappush(self._timers, (until_ms, self._seq, 0, [offset]))
        else:
            entry.until_ms = 0
            self._release(offset, entry)

    def take_dead(self) -> list[int]:
        """Offsets to copy to the dead-letter topic (then confirm them with ``dead_lettered``)."""
        dead, self._dead = sorted(set(self._dead)), []
        return [o for o in dead if o in self.entries and self.entries[o].state == DEAD]

    def requeue_dead(self, offsets: list[int]) -> None:
        """Hand ``offsets`` out again from ``take_dead`` (copying them to the dead-letter topic failed)."""
        self._dead.extend(offsets)

    def dead_lettered(self, offset: int) -> None:
        if offset in self.entries:
            self._finish(offset)

    def _finish(self, offset: int) -> None:
        del self.entries[offset]
        while self.done_below < self.next_offset and self.done_below not in self.entries:
            self.done_below += 1

    # ---- events --------------------------------------------------------------------------------

    def apply(self, event: list[Any]) -> None:
        """Replay one recorded event (no checks: it was checked when it was written)."""
        kind = event[0]
        if kind == "L":
            _, token, until_ms, offsets = event
            self._lease(list(offsets), token, until_ms)
        elif kind == "A":
            for offset in event[1]:
                if offset in self.entries:
                    self._finish(offset)
        elif kind == "N":
            _, until_ms, offsets = event
            for offset in offsets:
                entry = self.entries.get(offset)
                if entry is not None and entry.state != DEAD:
                    self._nack(offset, entry, until_ms)
        elif kind == "D":
            for offset in event[1]:
                self.dead_lettered(offset)
        elif kind == "W":
            self.withdraw(list(event[2]), event[1])
        elif kind == "S":
            self._restore(event[1], event[2], event[3])

    def snapshot_event(self) -> list[Any]:
        """An ``S`` event that stands for the whole state (the events before it may go)."""
        entries = [[o, e.state, e.count, e.token, e.until_ms] for o, e in self.entries.items()]
        return ["S", self.done_below, self.next_offset, entries]

    def _restore(self, done_below: int, next_offset: int, entries: list[list[int]]) -> None:
        self.done_below, self.next_offset = done_below, next_offset
        self.entries, self._ready, self._timers, self._dead = {}, [], [], []
        leases: dict[tuple[int, int], list[int]] = {}
        for offset, state, count, token, until_ms in entries:
            entry = self.entries[offset] = Entry()
            entry.state, entry.count, entry.token, entry.until_ms = state, count, token, until_ms
            if state == AVAILABLE:
                self._ready.append(offset)
            elif state == DEAD:
                self._dead.append(offset)
            else:
                leases.setdefault((until_ms, token), []).append(offset)
        heapq.heapify(self._ready)
        for (until_ms, token), offsets in sorted(leases.items()):
            self._seq += 1
            self._timers.append((until_ms, self._seq, token, offsets))
        heapq.heapify(self._timers)

    def after_replay(self, now_ms: int) -> None:
        """Leases recorded before a restart keep their deadlines; expired ones come back now."""
        self.expire(now_ms)


def lease_event(token: int, until_ms: int, offsets: list[int]) -> list[Any]:
    return ["L", token, until_ms, offsets]


def withdraw_event(token: int, offsets: list[int]) -> list[Any]:
    return ["W", token, offsets]


def ack_event(offsets: list[int]) -> list[Any]:
    return ["A", offsets]


def nack_event(until_ms: int, offsets: list[int]) -> list[Any]:
    return ["N", until_ms, offsets]


def dead_event(offsets: list[int], withheld: str | None = None) -> list[Any]:
    """Offsets done as dead letters; ``withheld`` says why they were not copied anywhere (the event's
    third item, which replay ignores: either way they are never delivered again)."""
    return ["D", offsets] if withheld is None else ["D", offsets, withheld]
