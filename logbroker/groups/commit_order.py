"""Per partition, a member's later commit wins over an earlier one that arrives after it (pure).

A member numbers its commits (``sequence``, increasing with every commit it sends). A commit can
reach the coordinator after a later-numbered one: a request its client gave up on, delivered
by TCP retransmission once a network partition heals, seconds after the member committed newer
offsets. Applied, it would move the group's committed offsets back. So a commit is skipped for a
partition whose committed offset came from the same member, in the same generation, with a higher
sequence (decision 0297). The same number again is the same commit sent again (a client retries a
request whose answer it did not get, and the first try may have failed before it was durable): it
applies, writing what it wrote before. Commits without a sequence (older clients, an admin reset)
order by arrival, as before, and so do commits without a member (``STANDALONE``: unrelated callers
share that empty id); generations are fenced by ``Group.check_commit``. A member that rejoins
under its old id keeps its generation when nothing else changed, so its numbers must grow across
its restarts (the Python client starts them from the clock).
"""

from __future__ import annotations

NO_SEQUENCE = -1


def superseded(previous_member: str, previous_generation: int, previous_sequence: int,
               member: str, generation: int, sequence: int) -> bool:
    """Whether a commit numbered ``sequence`` of ``member`` in ``generation`` is older than the
    partition's committed offset, which ``previous_member`` wrote with ``previous_sequence``."""
    return (bool(member) and sequence != NO_SEQUENCE and previous_sequence != NO_SEQUENCE and previous_member == member
            and previous_generation == generation and previous_sequence > sequence)
