"""``start_positions`` alone (pure): every assigned partition, and only those, gets a position; one
the stream kept goes on where it was, else the group's committed offset, else the reset point,
which is asked for only then."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from logbroker.groups.positions import start_positions

KEYS = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3))
OFFSETS = st.integers(0, 1_000)


@given(assigned=st.sets(KEYS), kept=st.dictionaries(KEYS, OFFSETS), committed=st.dictionaries(KEYS, OFFSETS),
       reset=OFFSETS)
def test_kept_then_committed_then_the_reset_point(assigned, kept, committed, reset):
    assignment: dict[str, list[int]] = {}
    for topic, partition in sorted(assigned):
        assignment.setdefault(topic, []).append(partition)
    asked: list[tuple[str, int]] = []

    async def reset_offset(topic: str, partition: int) -> int:
        asked.append((topic, partition))
        return reset

    positions = asyncio.run(start_positions(assignment, kept, lambda t, p: committed.get((t, p)), reset_offset))
    assert set(positions) == assigned
    for key, offset in positions.items():
        assert offset == kept.get(key, committed.get(key, reset))
    assert sorted(asked) == sorted(k for k in assigned if k not in kept and k not in committed)
