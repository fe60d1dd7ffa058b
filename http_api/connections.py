"""Slow and half-open HTTP clients: the rules, apart from any socket or clock (pure).

``ConnectionCount`` keeps the node-wide bound and each address's share of it (decision 0235): a
connection is counted from the moment the listener accepts it (under TLS, before its handshake)
until it is lost, at most ``limit`` at once and at most ``per_address`` from one address
(``logbroker.proxies.share_key``: an IPv4 address or an IPv6 /64); trusted proxies have no share
of their own, only the node-wide bound. One more is refused (answered ``refusal``: 503
``too_many_connections`` at the node's bound, 429 ``too_many_requests`` at the address's share,
``Connection: close``) and never reaches aiohttp, so unauthenticated peers cannot use up the
node's file descriptors, nor one address every other client's connections.

``HeadClock`` says when a connection's next request head (request line and headers) must be
complete, like nginx's ``client_header_timeout``: within ``timeout_s`` of accepting the connection
for its first request, and for each later request on a keep-alive connection within ``timeout_s``
of its first byte. An idle keep-alive connection with no byte of a next request is aiohttp's
``keepalive_timeout``'s business, not this clock's. The clock never runs while a request is being
served (long-polls and push streams have complete heads; they keep their own bounds) nor while a
body is arriving (bodies are bounded by ``body_timeout_ms`` where they are read). A head byte that
arrives while a request is served (pipelining) starts the clock when that request ends, since the
server reads nothing of the next request before.

What the clock learns comes from public hooks of aiohttp's server: bytes received, a request
made from a complete head (``began``), that request's body at its end (``body_done``), and its
handler returned (``ended``). Head bytes that arrive in the same read as the end of the previous
request's body, or as a whole earlier request, are not seen apart; such a connection is then
bounded by ``keepalive_timeout`` instead (aiohttp closes a connection whose handler waits that long
for a head after the last answer).
"""

from __future__ import annotations

import json
from typing import Final, Literal

from http_api.errors import problem_for
from logbroker.descriptors import CONNECTIONS_SHARE_DIVISOR
from logbroker.errors import BrokerError, TooManyConnectionsError, TooManyRequestsError

REFUSAL_RETRY_AFTER_S: Final = 1
PER_ADDRESS_SHARE_DIVISOR: Final = 10
Refusal = Literal["node", "address"]


def connections_cap(configured: int, descriptor_limit: int | None) -> int:
    """The bound on open connections: ``connections_max``, but at most the connections' share of
    the process's soft descriptor limit (a quarter, ``logbroker.descriptors``: the rest is for
    segment files, partitions, internal RPC, the coordinator; ``None``: unlimited), at least one."""
    assert configured > 0, configured
    if descriptor_limit is None:
        return configured
    return max(1, min(configured, descriptor_limit // CONNECTIONS_SHARE_DIVISOR))


def per_address_cap(configured: int, cap: int) -> int:
    """One address's share of the node's bound ``cap``: ``connections_per_address_max`` (0: a
    tenth of ``cap``), never more than ``cap``, at least one."""
    assert configured >= 0 and cap > 0, (configured, cap)
    share = configured if configured > 0 else cap // PER_ADDRESS_SHARE_DIVISOR
    return max(1, min(cap, share))


class ConnectionCount:
    """Open connections against ``limit`` and, per share key, ``per_address``; what the bounds did
    (counters for metrics). Keys with no connection open are forgotten, so the table holds at
    most ``limit`` entries."""

    __slots__ = ("by_address", "handshake_timeouts", "header_timeouts", "limit", "open", "per_address", "refused",
                 "refused_per_address")

    def __init__(self, limit: int, per_address: int | None = None) -> None:
        assert limit > 0, limit
        self.limit = limit
        self.per_address = limit if per_address is None else per_address
        assert 0 < self.per_address <= limit, (self.per_address, limit)
        self.open = 0
        self.by_address: dict[str, int] = {}
        self.refused = 0
        self.refused_per_address = 0
        self.header_timeouts = 0
        self.handshake_timeouts = 0

    def admit(self, key: str | None = None) -> Refusal | None:
        """Count one more connection from share key ``key`` (None: a trusted proxy, no share of its
        own); which bound refuses it (counted) when ``limit`` are open or ``key`` holds
        ``per_address``."""
        if self.open >= self.limit:
            self.refused += 1
            return "node"
        if key is not None:
            held = self.by_address.get(key, 0)
            if held >= self.per_address:
                self.refused_per_address += 1
                return "address"
            self.by_address[key] = held + 1
        self.open += 1
        return None

    def release(self, key: str | None = None) -> None:
        assert self.open > 0, "released a connection that was not admitted"
        self.open -= 1
        if key is not None:
            left = self.by_address.pop(key) - 1
            assert left >= 0, key
            if left:
                self.by_address[key] = left


class HeadClock:
    """When the next request head of one connection must be complete (see the module doc).

    Times are the event loop's monotonic seconds, passed in by the caller."""

    __slots__ = ("busy", "in_body", "started_at", "timeout_s")

    def __init__(self, timeout_s: float, accepted_at: float) -> None:
        assert timeout_s > 0, timeout_s
        self.timeout_s = timeout_s
        self.started_at: float | None = accepted_at  # the first request's clock runs from accept
        self.busy = False
        self.in_body = False

    def received(self, now: float) -> bool:
        """Bytes arrived; True when they started the clock (the caller arms its timer)."""
        if self.in_body or self.started_at is not None:
            return False
        self.started_at = now
        return not self.busy

    def began(self, body_pending: bool) -> None:
        """A complete head became a request; its body, if any, is still to come."""
        self.busy = True
        self.in_body = body_pending
        self.started_at = None

    def body_done(self) -> None:
        self.in_body = False

    def ended(self, now: float) -> bool:
        """The request's handler returned; True when a next head had begun (its clock starts now)."""
        assert self.busy, "ended without began"
        self.busy = False
        if self.started_at is None:
            return False
        self.started_at = now
        return True

    def deadline(self) -> float | None:
        if self.busy or self.started_at is None:
            return None
        return self.started_at + self.timeout_s

    def expired(self, now: float) -> bool:
        deadline = self.deadline()
        return deadline is not None and now >= deadline


def refusal_error(kind: Refusal, count: ConnectionCount) -> BrokerError:
    if kind == "node":
        return TooManyConnectionsError(f"the node has {count.limit} connections open (connections_max); "
                                       "try again later", retry_after_s=REFUSAL_RETRY_AFTER_S)
    return TooManyRequestsError(f"{count.per_address} connections are open from this address "
                                "(connections_per_address_max); close some or try again later",
                                retry_after_s=REFUSAL_RETRY_AFTER_S)


def refusal(error: BrokerError) -> bytes:
    """The whole answer to a connection over a bound: a minimal HTTP/1.1 problem (503 or 429)."""
    response = problem_for(error)
    body = response.body
    assert isinstance(body, bytes) and json.loads(body)["code"] == error.code
    head = (f"HTTP/1.1 {response.status} {response.reason}\r\n"
            f"Content-Type: {response.content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Retry-After: {response.headers['Retry-After']}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode("ascii") + body
