"""``CallBudget`` alone: each share holds under any order of admits, proofs and releases, the slots
kept for authenticated callers stay free of unproven calls, and nothing is left behind."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpc_api.call_budget import UNIX_ADDRESS, CallBudget, CallLimits, Ticket, peer_parts

LIMITS = CallLimits(calls_max=12, per_connection_max=3, per_address_max=5, per_user_max=4, reserved=4)


def test_peer_parts_name_the_connection_and_its_address():
    assert peer_parts("ipv4:10.0.0.1:5000") == ("ipv4:10.0.0.1:5000", "10.0.0.1")
    assert peer_parts("ipv6:[::1]:5000") == ("ipv6:[::1]:5000", "::1")
    assert peer_parts("ipv6:%5B::1%5D:5000")[1] == UNIX_ADDRESS  # an unknown form is not trusted as an address
    assert peer_parts("unix:/tmp/socket") == ("unix:/tmp/socket", UNIX_ADDRESS)
    assert peer_parts("") == ("", UNIX_ADDRESS)


def test_unproven_calls_leave_the_reserved_slots_to_proven_ones():
    budget = CallBudget(LIMITS)
    unproven = [budget.admit(f"c{n}", f"a{n}") for n in range(LIMITS.calls_max - LIMITS.reserved)]
    assert all(isinstance(t, Ticket) for t in unproven)
    assert "kept for authenticated callers" in str(budget.admit("c-late", "a-late"))
    first = unproven[0]
    assert isinstance(first, Ticket) and budget.prove(first, "alice") is None
    assert isinstance(budget.admit("c-late", "a-late"), Ticket)  # a proven call frees an unproven slot


def test_the_user_share_refuses_a_proof_and_the_call_stays_unproven():
    budget = CallBudget(LIMITS)
    tickets = [budget.admit(f"c{n}", f"a{n}") for n in range(LIMITS.per_user_max + 1)]
    assert all(isinstance(t, Ticket) for t in tickets)
    refusals = [budget.prove(t, "alice") for t in tickets if isinstance(t, Ticket)]
    assert refusals[:-1] == [None] * LIMITS.per_user_max and "'alice'" in str(refusals[-1])
    assert budget.held(user="alice") == LIMITS.per_user_max and budget.unproven == 1


def test_the_connection_and_address_shares():
    budget = CallBudget(LIMITS)
    on_one = [budget.admit("c1", "a1") for _ in range(LIMITS.per_connection_max + 1)]
    assert "this connection" in str(on_one[-1])
    from_one = [budget.admit(f"c{n}", "a1") for n in range(2, 2 + LIMITS.per_address_max)]
    assert sum(isinstance(t, Ticket) for t in on_one + from_one) == LIMITS.per_address_max
    assert "this address" in str(from_one[-1])
    assert isinstance(budget.admit("c9", "a2"), Ticket)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["admit", "prove", "release"]), st.integers(0, 3), st.integers(0, 2),
                          st.integers(0, 2), st.integers(0, 40)), max_size=120))
def test_every_share_holds_under_any_order_and_nothing_is_left_behind(steps):
    budget = CallBudget(LIMITS)
    live: list[Ticket] = []
    for action, connection, address, user, pick in steps:
        if action == "admit":
            ticket = budget.admit(f"a{address}:c{connection}", f"a{address}")
            if isinstance(ticket, Ticket):
                live.append(ticket)
        elif live and action == "prove":
            ticket = live[pick % len(live)]
            if not ticket.proven:
                budget.prove(ticket, f"u{user}" if user else None)
        elif live:
            budget.release(live.pop(pick % len(live)))
        assert budget.calls == len(live) <= LIMITS.calls_max
        assert budget.unproven == sum(not t.proven for t in live) <= LIMITS.calls_max - LIMITS.reserved
        for key in {t.connection for t in live}:
            assert budget.held(connection=key) == sum(t.connection == key for t in live) <= LIMITS.per_connection_max
        for key in {t.address for t in live}:
            assert budget.held(address=key) == sum(t.address == key for t in live) <= LIMITS.per_address_max
        for key in {t.user for t in live if t.user}:
            assert budget.held(user=key) == sum(t.user == key for t in live) <= LIMITS.per_user_max
    for ticket in live:
        budget.release(ticket)
    assert budget.calls == budget.unproven == budget.keys() == 0


def test_a_ticket_is_released_once():
    budget = CallBudget(LIMITS)
    ticket = budget.admit("c", "a")
    assert isinstance(ticket, Ticket)
    budget.release(ticket)
    with pytest.raises(AssertionError):
        budget.release(ticket)
