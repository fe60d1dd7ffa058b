"""The connection rules alone (``http_api.connections``): the bound on open connections and each
address's share of it, the refusals' bytes, and when a request head must be complete, driven by
events with explicit times."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from http_api.connections import (
    ConnectionCount,
    HeadClock,
    connections_cap,
    per_address_cap,
    refusal,
    refusal_error,
)

T = 0.5


def test_cap_is_the_setting_but_at_most_a_quarter_of_the_descriptors():
    assert connections_cap(10_000, None) == 10_000
    assert connections_cap(10_000, 1024) == 256
    assert connections_cap(100, 1_048_576) == 100
    assert connections_cap(10_000, 1) == 1


def test_count_refuses_over_the_limit_and_admits_again_after_a_release():
    count = ConnectionCount(2)
    assert count.admit() is None and count.admit() is None
    assert count.admit() == "node" and count.admit() == "node"
    assert (count.open, count.refused) == (2, 2)
    count.release()
    assert count.admit() is None and count.open == 2
    for _ in range(2):
        count.release()
    with pytest.raises(AssertionError):
        count.release()


def test_an_address_share_is_a_tenth_of_the_bound_unless_set():
    assert per_address_cap(0, 5_000) == 500
    assert per_address_cap(0, 5) == 1
    assert per_address_cap(64, 5_000) == 64
    assert per_address_cap(10_000, 5_000) == 5_000


def test_one_address_holds_at_most_its_share_and_others_and_trusted_proxies_are_still_admitted():
    count = ConnectionCount(10, per_address=3)
    assert [count.admit("10.0.0.1") for _ in range(4)] == [None, None, None, "address"]
    assert count.admit("10.0.0.2") is None, "another address is admitted"
    assert [count.admit(None) for _ in range(6)] == [None] * 6, "a trusted proxy has no share of its own"
    assert count.admit(None) == "node" and count.admit("10.0.0.3") == "node"
    assert (count.open, count.refused, count.refused_per_address) == (10, 2, 1)
    count.release("10.0.0.1")
    assert count.admit(None) is None and count.admit("10.0.0.1") == "node", "the node's bound still holds"
    count.release(None)
    assert count.admit("10.0.0.1") is None and count.by_address["10.0.0.1"] == 3


@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b", "c", None])), max_size=200))
def test_shares_never_exceed_their_bounds_and_are_forgotten_when_empty(events):
    count = ConnectionCount(8, per_address=3)
    held: list[str | None] = []
    for opening, key in events:
        if opening:
            if count.admit(key) is None:
                held.append(key)
        elif key in held:
            held.remove(key)
            count.release(key)
        assert count.open == len(held) <= 8
        assert all(count.by_address[k] == held.count(k) <= 3 for k in count.by_address)
        assert set(count.by_address) == {k for k in held if k is not None}


def test_refusal_at_an_address_share_is_a_429_problem_that_closes():
    raw = refusal(refusal_error("address", ConnectionCount(10, per_address=4)))
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 429 Too Many Requests\r\n") and b"Connection: close" in head
    problem = json.loads(body)
    assert problem["code"] == "too_many_requests" and "4 connections" in problem["detail"]
    assert "connections_per_address_max" in problem["detail"]


def test_refusal_is_a_complete_http_503_problem_that_closes():
    raw = refusal(refusal_error("node", ConnectionCount(7)))
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("ascii").split("\r\n")
    assert lines[0] == "HTTP/1.1 503 Service Unavailable"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Connection"] == "close" and headers["Content-Type"] == "application/problem+json"
    assert int(headers["Content-Length"]) == len(body) and int(headers["Retry-After"]) >= 1
    problem = json.loads(body)
    assert problem["type"].endswith("/errors/too_many_connections")
    assert problem["status"] == 503 and problem["retriable"] is True and "7 connections" in problem["detail"]


def test_first_head_counts_from_accept_and_stops_when_complete():
    clock = HeadClock(T, accepted_at=10.0)
    assert clock.deadline() == 10.0 + T
    assert not clock.received(10.3), "bytes of a head already timed do not restart it"
    assert clock.deadline() == 10.0 + T and clock.expired(10.0 + T) and not clock.expired(10.4)
    clock.began(body_pending=False)
    assert clock.deadline() is None and not clock.expired(1e9)


def test_a_request_being_served_never_times_out():
    clock = HeadClock(T, accepted_at=0.0)
    clock.began(body_pending=False)
    assert not clock.received(1.0), "a pipelined head's byte while serving does not start a timer"
    assert clock.deadline() is None and not clock.expired(3600.0)
    assert clock.ended(3600.0), "its clock starts when the server is ready to read it"
    assert clock.deadline() == 3600.0 + T


def test_idle_keep_alive_is_not_timed_until_a_next_head_begins():
    clock = HeadClock(T, accepted_at=0.0)
    clock.began(body_pending=False)
    assert not clock.ended(0.1)
    assert clock.deadline() is None and not clock.expired(1000.0)
    assert clock.received(1000.0)
    assert clock.deadline() == 1000.0 + T


def test_body_bytes_never_start_the_head_clock():
    clock = HeadClock(T, accepted_at=0.0)
    clock.began(body_pending=True)
    assert not clock.received(0.1) and not clock.received(5.0)
    clock.body_done()
    assert not clock.ended(5.1)
    assert clock.deadline() is None
    clock.began(body_pending=True)
    assert not clock.ended(6.0), "the handler answered before the body ended (it lingers)"
    assert not clock.received(6.5) and clock.deadline() is None
    clock.body_done()
    assert clock.received(7.0) and clock.deadline() == 7.0 + T


EVENTS = st.lists(st.tuples(st.sampled_from(["received", "began", "began_body", "body_done", "ended"]),
                            st.floats(min_value=0.0, max_value=100.0, allow_nan=False)), max_size=60)


@given(EVENTS)
def test_clock_invariants_over_any_event_history(events):
    clock = HeadClock(T, accepted_at=0.0)
    now = 0.0
    busy = in_body = False
    last_ready = 0.0  # when the server last became ready to read a head (accept, or a request's end)
    for kind, step in events:
        now += step
        if kind == "received":
            clock.received(now)
        elif kind in ("began", "began_body"):
            if busy:
                continue  # aiohttp serves one request at a time per connection
            busy, in_body = True, kind == "began_body"
            clock.began(body_pending=in_body)
        elif kind == "body_done":
            in_body = False
            clock.body_done()
        elif kind == "ended":
            if not busy:
                continue
            busy = False
            last_ready = now
            clock.ended(now)
        deadline = clock.deadline()
        if busy:
            assert deadline is None and not clock.expired(now + 1e6)
        if deadline is not None:
            assert deadline >= last_ready + T, "never less than the bound after the server is ready"
            assert deadline <= now + T


class _Transport:
    def __init__(self, peer: str, local: str = "10.0.0.1") -> None:
        self.names = {"peername": (peer, 40000), "sockname": (local, 8080)}

    def get_extra_info(self, name: str) -> object:
        return self.names.get(name)


def test_the_guard_gives_no_share_to_trusted_proxies_cluster_nodes_or_this_host():
    from aiohttp import web

    from http_api.listener import ConnectionGuard
    from logbroker.proxies import TrustedProxies

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    async def make() -> ConnectionGuard:
        return ConnectionGuard(web.Server(handler), connections_max=100, header_timeout_s=1.0, per_address_max=1,
                               trusted=TrustedProxies.parse("192.168.0.0/16"))

    guard = asyncio.run(make())
    guard.exempt = frozenset({"10.0.0.2"})
    assert guard.admit(_Transport("203.0.113.5")) == (None, "203.0.113.5")
    assert guard.admit(_Transport("203.0.113.5")) == ("address", "203.0.113.5")
    assert guard.admit(_Transport("::ffff:203.0.113.6")) == (None, "203.0.113.6")
    for peer in ("192.168.7.7", "10.0.0.2", "10.0.0.1", "::ffff:10.0.0.1"):
        assert guard.admit(_Transport(peer)) == (None, None), peer
        assert guard.admit(_Transport(peer)) == (None, None), peer
    assert guard.admit(_Transport("2001:db8::1", local="2001:db8::9")) == (None, "2001:db8::/64")
    assert guard.admit(_Transport("2001:db8::2", local="2001:db8::9")) == ("address", "2001:db8::/64")
