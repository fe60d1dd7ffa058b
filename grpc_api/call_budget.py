"""Shares of the node's gRPC call slots (pure: counts only, no I/O, no clock).

grpcio counts a call against ``maximum_concurrent_rpcs`` from the moment its headers arrive, before
its token is read and before its request message comes, and refuses every call past that limit.
Without shares one peer that opens streams and never sends a request holds every slot, with no
token at all. ``CallBudget`` keeps, for the calls it admitted:

- calls on one connection <= ``per_connection_max`` and from one peer address <= ``per_address_max``;
- calls of one authenticated user <= ``per_user_max``;
- calls not yet proven <= ``calls_max - reserved``: a call is proven once its token checked out (with
  auth on) or, with auth off, once its request arrived; the ``reserved`` slots are kept for proven
  callers. A server reflection call is public and never proven.

A ticket is released exactly once; every map drops a key whose count reaches zero, so memory is
bounded by the calls in progress.
"""

from __future__ import annotations

import dataclasses
from typing import Final

UNIX_ADDRESS: Final = "unix"  # every caller on the node's own socket path is one address


@dataclasses.dataclass(frozen=True, slots=True)
class CallLimits:
    calls_max: int
    per_connection_max: int
    per_address_max: int
    per_user_max: int
    reserved: int

    def __post_init__(self) -> None:
        assert 0 <= self.reserved < self.calls_max, "reserved must leave unproven calls at least one slot"
        assert min(self.per_connection_max, self.per_address_max, self.per_user_max) > 0


@dataclasses.dataclass(slots=True)
class Ticket:
    """One admitted call: where it came from and whether (and as whom) it has been proven."""

    connection: str
    address: str
    proven: bool = False
    user: str | None = None
    released: bool = False


def peer_parts(peer: str) -> tuple[str, str]:
    """``(connection, address)`` of grpcio's ``context.peer()``: ``ipv4:10.0.0.1:5000`` is the
    connection ``ipv4:10.0.0.1:5000`` from the address ``10.0.0.1``; ``ipv6:[::1]:5000`` is from
    ``::1``; anything else (a Unix socket, an unknown form) is its own connection from ``unix``."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4" and ":" in rest:
        return peer, rest.rsplit(":", 1)[0]
    if kind == "ipv6" and rest.startswith("[") and "]" in rest:
        return peer, rest[1:rest.index("]")]
    return peer, UNIX_ADDRESS


class CallBudget:
    def __init__(self, limits: CallLimits) -> None:
        self.limits = limits
        self.calls = 0
        self.unproven = 0
        self._by_connection: dict[str, int] = {}
        self._by_address: dict[str, int] = {}
        self._by_user: dict[str, int] = {}

    def admit(self, connection: str, address: str) -> Ticket | str:
        """A ticket for a new, unproven call, or why it is refused."""
        limits = self.limits
        if self.calls >= limits.calls_max:
            return f"the node has {self.calls} gRPC calls in progress"
        if self.unproven >= limits.calls_max - limits.reserved:
            return (f"{self.unproven} gRPC calls are waiting for a token or a request; the other "
                    f"{limits.reserved} are kept for authenticated callers")
        if self._by_connection.get(connection, 0) >= limits.per_connection_max:
            return f"this connection has {limits.per_connection_max} gRPC calls in progress"
        if self._by_address.get(address, 0) >= limits.per_address_max:
            return f"this address has {limits.per_address_max} gRPC calls in progress"
        self.calls += 1
        self.unproven += 1
        _add(self._by_connection, connection, 1)
        _add(self._by_address, address, 1)
        return Ticket(connection, address)

    def prove(self, ticket: Ticket, user: str | None = None) -> str | None:
        """Count ``ticket`` as proven (``user``: the authenticated user it counts against, if any);
        the refusal when that user already has ``per_user_max`` calls (the ticket stays unproven)."""
        assert not ticket.released and not ticket.proven
        if user is not None:
            if self._by_user.get(user, 0) >= self.limits.per_user_max:
                return f"{user!r} has {self.limits.per_user_max} gRPC calls in progress"
            _add(self._by_user, user, 1)
            ticket.user = user
        ticket.proven = True
        self.unproven -= 1
        return None

    def release(self, ticket: Ticket) -> None:
        assert not ticket.released
        ticket.released = True
        self.calls -= 1
        if not ticket.proven:
            self.unproven -= 1
        _add(self._by_connection, ticket.connection, -1)
        _add(self._by_address, ticket.address, -1)
        if ticket.user is not None:
            _add(self._by_user, ticket.user, -1)
        assert self.calls >= 0 and 0 <= self.unproven <= self.calls

    def held(self, *, connection: str | None = None, address: str | None = None, user: str | None = None) -> int:
        """Calls in progress on a connection, from an address or of a user (for tests and metrics)."""
        if connection is not None:
            return self._by_connection.get(connection, 0)
        if address is not None:
            return self._by_address.get(address, 0)
        return self._by_user.get(user or "", 0)

    def keys(self) -> int:
        """Entries held in the maps: zero when no call is in progress."""
        return len(self._by_connection) + len(self._by_address) + len(self._by_user)


def _add(counts: dict[str, int], key: str, delta: int) -> None:
    value = counts.get(key, 0) + delta
    assert value >= 0
    if value:
        counts[key] = value
    else:
        del counts[key]
