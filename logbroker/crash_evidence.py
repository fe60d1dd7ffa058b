"""When a node's session may be ended before its lease lapses: the evidence that its process
crashed, as pure rules (decision 0260). No I/O and no clock: outcomes and times come in as
arguments (``tests/logbroker/test_crash_evidence.py``); ``logbroker.crash_watch`` gathers them.

A node whose lease is ended early loses its leaderships at once, so the rule must never end the
lease of a process that may still acknowledge writes. Invariants:
- only a refused connection counts (the node's host answered that nothing listens on the port);
  a timeout, an unreachable host or network, a reset after connecting, anything else proves
  nothing (a partition looks like that), and an accepted connection proves the process is there
  (a paused process still completes handshakes from its listen backlog);
- every address the node registered with its lease must refuse (a live process keeps all of
  them bound from before it registered until after its session ends);
- a witness's refusal counts only for the registration it probed (the same ``nodes/<id>``
  revision, so the same lease and addresses): a stale address or a restarted process is
  never held against the current one;
- one witness is never enough: refusals from a majority of the other registered nodes, and at
  least two, so one node with a broken route or a rejecting firewall cannot evict a healthy
  one. A cluster of two has no second witness: its crashed node waits out its lease.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from typing import Final

WITNESSES_MIN: Final = 2


class Probe(enum.Enum):
    REFUSED = "refused"    # the host answered: nothing listens on the port
    ACCEPTED = "accepted"  # something listens: the process (or its successor) is there
    UNKNOWN = "unknown"    # no answer, no route, or any other failure: proves nothing


def probe_outcome(error: BaseException | None) -> Probe:
    """What one connection attempt says: ``error`` None when the connection was accepted."""
    if error is None:
        return Probe.ACCEPTED
    if isinstance(error, ConnectionRefusedError):
        return Probe.REFUSED
    return Probe.UNKNOWN


def crashed(outcomes: Sequence[Probe]) -> bool:
    """Every registered address refused (and there was at least one)."""
    return bool(outcomes) and all(o is Probe.REFUSED for o in outcomes)


def witnesses_needed(registered: int) -> int | None:
    """How many distinct witnesses end the session of one of ``registered`` live nodes (the
    suspect included): a majority of the others, at least ``WITNESSES_MIN``; None when there
    are not enough others (the lease is waited out)."""
    others = registered - 1
    needed = max(WITNESSES_MIN, others // 2 + 1)
    return needed if others >= needed else None


def evicts(witnesses: Collection[int], suspect: int, registered: int) -> bool:
    """Enough distinct witnesses, none of them the suspect itself, to end its session."""
    needed = witnesses_needed(registered)
    return needed is not None and len(set(witnesses) - {suspect}) >= needed


def may_probe(last_probe_at: float | None, now: float, spacing_s: float) -> bool:
    """Probes of one node are at least ``spacing_s`` apart (a bound on the work that failing
    calls to it can cause)."""
    return last_probe_at is None or now - last_probe_at >= spacing_s
