"""Who may lead a partition: the ISR and the eligible leader replicas (ELR), as pure rules
(decision 0385, after Kafka's KIP-966). No I/O: the coordinator applies them in its
transactions, the leader in its ISR changes, ``partition_roles`` in its choice of candidate.

Why an ELR: a leader drops a dead or lagging follower from the ISR so that writes go on. When
that leaves fewer than ``min_insync`` members, ``acks=all`` writes are refused from then on, so
every record ever acknowledged is held by the dropped follower too; and the leader, left alone
in the ISR, may lose its unflushed tail to a power cut. The ELR remembers the dropped followers
as replicas that may still lead, so that the one holding the acknowledged records is chosen
over a leader that restarted without them.

Invariants:
- the ELR is disjoint from the ISR, lies within the replicas, and is empty whenever the ISR has
  at least ``min_insync`` members;
- every ELR member holds everything below the high watermark: a member enters the ELR only from
  the ISR (whose members all hold it), and the leader does not advance the high watermark while
  the ELR is not empty;
- a replica that restarted after an unclean shutdown (it may lack records it had acknowledged)
  leaves the ISR and the ELR while any other member stays eligible; the last eligible replica
  stays (no other copy holds more), and the ISR never becomes empty: when the restarted replica
  was its only member, the ELR takes its place.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def after_isr_change(replicas: Sequence[int], isr: Collection[int], elr: Collection[int], drop: Collection[int],
                     join: Collection[int], leader: int, min_insync: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ISR and ELR once the leader drops ``drop`` and adds ``join`` (both in replica order,
    the leader always in the ISR): the dropped members join the ELR when the ISR is left under
    ``min_insync``; an ISR at or over it clears the ELR."""
    new_isr = tuple(n for n in replicas if n == leader or (n in isr and n not in drop) or n in join)
    if len(new_isr) >= min_insync:
        return new_isr, ()
    eligible = (set(elr) | {n for n in drop if n in isr}) - set(new_isr)
    return new_isr, tuple(n for n in replicas if n in eligible)


def elected(replicas: Sequence[int], isr: Collection[int], elr: Collection[int],
            node: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The ISR and ELR once ``node`` wins an election, None when it may not stand. A member of
    the ISR leaves both as they are; a member of the ELR (chosen when no ISR member is alive)
    becomes the ISR alone, and the old ISR members join the ELR (they hold everything below the
    high watermark as well)."""
    if node in isr:
        return tuple(isr), tuple(elr)
    if node not in elr:
        return None
    eligible = (set(isr) | set(elr)) - {node}
    return (node,), tuple(n for n in replicas if n in eligible)


def withdrawn(replicas: Sequence[int], isr: Collection[int], elr: Collection[int],
              node: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The ISR and ELR once ``node``, restarted after an unclean shutdown, leaves them; None
    when nothing changes (it is in neither, or it is the last eligible replica)."""
    if node not in isr and node not in elr:
        return None
    rest_isr = tuple(n for n in replicas if n in isr and n != node)
    rest_elr = tuple(n for n in replicas if n in elr and n != node)
    if not rest_isr and not rest_elr:
        return None
    if not rest_isr:
        return rest_elr, ()
    return rest_isr, rest_elr


def check_elr(replicas: Sequence[int], isr: Collection[int], elr: Collection[int]) -> str | None:
    """What is wrong with an ELR, None when it is sound (distinct replicas outside the ISR)."""
    if len(set(elr)) != len(elr) or not set(elr) <= set(replicas):
        return f"an ELR is a set of distinct replicas of {list(replicas)}, not {list(elr)}"
    if set(elr) & set(isr):
        return f"an ELR lies outside the ISR {list(isr)}, not {list(elr)}"
    return None
