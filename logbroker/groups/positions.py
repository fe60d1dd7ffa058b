"""Where a member's push stream reads each partition of a new assignment: the one rule every API's
member stream follows (the HTTP member stream and the gRPC group subscription).

A partition the member keeps across a rebalance goes on where the stream is (what it sent is not
sent again); a partition new to it starts at the group's committed offset; one the group never
committed starts at the reset point (earliest or latest). No I/O of its own: the committed offsets
and the reset point come from the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

Position = tuple[str, int]  # (topic, partition)


async def start_positions(assignment: Mapping[str, Iterable[int]], kept: Mapping[Position, int],
                          committed: Callable[[str, int], int | None],
                          reset_offset: Callable[[str, int], Awaitable[int]]) -> dict[Position, int]:
    """The offset to read next for each partition of ``assignment`` (topic -> partitions), given
    where the stream was (``kept``), the group's ``committed(topic, partition)`` offsets and
    ``reset_offset(topic, partition)`` for a partition with none."""
    positions: dict[Position, int] = {}
    for topic, partitions in assignment.items():
        for partition in partitions:
            key = (topic, partition)
            if key in kept:
                positions[key] = kept[key]
                continue
            offset = committed(topic, partition)
            positions[key] = offset if offset is not None else await reset_offset(topic, partition)
    return positions
