"""The ISR and eligible-leader-replica rules (``coordinator.eligibility``): examples of each, and
their invariants over every small state (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.eligibility import after_isr_change, check_elr, elected, withdrawn

REPLICAS = (1, 2, 3)


def test_a_follower_dropped_under_min_insync_stays_eligible():
    assert after_isr_change(REPLICAS, (1, 2), (), drop=(2,), join=(), leader=1, min_insync=2) == ((1,), (2,))
    assert after_isr_change(REPLICAS, (1, 2, 3), (), drop=(3,), join=(), leader=1, min_insync=2) == ((1, 2), ()), \
        "an ISR still at the minimum needs no ELR"
    assert after_isr_change(REPLICAS, (1,), (2,), drop=(), join=(3,), leader=1, min_insync=2) == ((1, 3), ()), \
        "an ISR back at the minimum clears the ELR"
    assert after_isr_change(REPLICAS, (1,), (2, 3), drop=(), join=(2,), leader=1, min_insync=3) == ((1, 2), (3,))


def test_an_election_from_the_elr_leaves_the_old_isr_eligible():
    assert elected(REPLICAS, (1,), (2,), 1) == ((1,), (2,))
    assert elected(REPLICAS, (1,), (3, 2), 2) == ((2,), (1, 3))
    assert elected(REPLICAS, (1,), (2,), 3) is None


def test_an_unclean_restart_leaves_while_another_replica_stays_eligible():
    assert withdrawn(REPLICAS, (1, 2), (), 1) == ((2,), ())
    assert withdrawn(REPLICAS, (1,), (2, 3), 1) == ((2, 3), ()), "the ELR takes the ISR's place"
    assert withdrawn(REPLICAS, (1,), (2, 3), 3) == ((1,), (2,))
    assert withdrawn(REPLICAS, (1,), (), 1) is None, "the last eligible replica stays"
    assert withdrawn(REPLICAS, (1,), (2,), 3) is None, "not a member: nothing changes"


def test_an_unsound_elr_is_named():
    assert check_elr(REPLICAS, (1,), (2, 3)) is None
    assert "outside the ISR" in str(check_elr(REPLICAS, (1,), (1,)))
    assert "distinct" in str(check_elr(REPLICAS, (1,), (2, 2)))
    assert "distinct" in str(check_elr(REPLICAS, (1,), (4,)))


@st.composite
def roles(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """A sound ISR (non-empty) and ELR of ``REPLICAS``, and a ``min_insync``."""
    isr = tuple(n for n in REPLICAS if draw(st.booleans())) or (draw(st.sampled_from(REPLICAS)),)
    min_insync = draw(st.integers(1, 3))
    elr = () if len(isr) >= min_insync else tuple(n for n in REPLICAS if n not in isr and draw(st.booleans()))
    return isr, elr, min_insync


def sound(isr: tuple[int, ...], elr: tuple[int, ...]) -> bool:
    return bool(isr) and check_elr(REPLICAS, isr, elr) is None


@given(roles(), st.sets(st.sampled_from(REPLICAS)), st.sets(st.sampled_from(REPLICAS)))
def test_an_isr_change_keeps_every_holder_of_the_committed_records_eligible(roles_now, drop, join):
    isr, elr, min_insync = roles_now
    leader = isr[0]
    drop, join = drop & set(isr) - {leader}, join - set(isr)
    new_isr, new_elr = after_isr_change(REPLICAS, isr, elr, drop, join, leader, min_insync)
    assert sound(new_isr, new_elr) and leader in new_isr
    assert set(new_isr) == (set(isr) - drop) | join
    if len(new_isr) >= min_insync:
        assert new_elr == ()
    else:  # under the minimum no acks=all write was acknowledged since: every earlier holder stays eligible
        assert set(isr) | set(elr) <= set(new_isr) | set(new_elr)


@given(roles(), st.sampled_from(REPLICAS))
def test_elections_and_withdrawals_keep_the_roles_sound_and_never_lose_the_last_eligible(roles_now, node):
    isr, elr, _ = roles_now
    won = elected(REPLICAS, isr, elr, node)
    if won is None:
        assert node not in isr and node not in elr
    else:
        assert sound(*won) and node in won[0]
        assert set(won[0]) | set(won[1]) == set(isr) | set(elr)
    left = withdrawn(REPLICAS, isr, elr, node)
    eligible = set(isr) | set(elr)
    if left is None:
        assert node not in eligible or eligible == {node}
    else:
        assert sound(*left)
        assert set(left[0]) | set(left[1]) == eligible - {node}
