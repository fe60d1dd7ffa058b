"""The crash-evidence rules alone (decision 0260): only refusals count, all addresses must refuse,
and one witness (or the suspect itself) never ends a session."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.crash_evidence import (
    Probe,
    crashed,
    evicts,
    may_probe,
    probe_outcome,
    witnesses_needed,
)


def test_only_a_refused_connection_is_evidence():
    assert probe_outcome(ConnectionRefusedError()) is Probe.REFUSED
    assert probe_outcome(None) is Probe.ACCEPTED
    for error in (TimeoutError(), ConnectionResetError(), OSError(113, "No route to host"),
                  OSError(22, "Invalid argument"), OSError(101, "Network is unreachable"), PermissionError()):
        assert probe_outcome(error) is Probe.UNKNOWN, error


@given(st.lists(st.sampled_from(list(Probe)), max_size=4))
def test_a_crash_needs_every_address_refusing(outcomes):
    assert crashed(outcomes) == (bool(outcomes) and set(outcomes) == {Probe.REFUSED})


def test_the_witnesses_needed_by_cluster_size():
    assert witnesses_needed(1) is None
    assert witnesses_needed(2) is None, "a lone other node is never enough"
    assert witnesses_needed(3) == 2
    assert witnesses_needed(4) == 2
    assert witnesses_needed(5) == 3
    assert witnesses_needed(7) == 4


@given(st.integers(min_value=1, max_value=9), st.sets(st.integers(min_value=1, max_value=9)),
       st.integers(min_value=1, max_value=9))
def test_no_single_witness_and_never_the_suspect_alone(registered, witnesses, suspect):
    others = witnesses - {suspect}
    if evicts(witnesses, suspect, registered):
        assert len(others) >= 2
        assert len(others) > (registered - 1) // 2, "a majority of the other nodes"
    if len(others) <= 1:
        assert not evicts(witnesses, suspect, registered)


def test_every_other_node_of_three_evicts():
    assert evicts({2, 3}, 1, 3)
    assert not evicts({2}, 1, 3)
    assert not evicts({1, 2}, 1, 3)


def test_probes_of_one_node_are_spaced():
    assert may_probe(None, 5.0, 0.2)
    assert not may_probe(5.0, 5.1, 0.2)
    assert may_probe(5.0, 5.2, 0.2)
