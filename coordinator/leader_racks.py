"""The topic config ``leader_racks`` (DESIGN §10): an ordered list of rack names where the topic's
partition leaders should be, so producers in those racks write to a local leader (decision 0310).

Pure: no I/O, no clock. A node's *rank* for a topic is the position of its rack in the list, or
the list's length when its rack is not listed (or it has none): lower is better. Every rule that
picks a leader (placement of the preferred replica, election of a leaderless partition, failback)
compares ranks first and falls back to its own order between equal ranks, so without
``leader_racks`` (every rank 0) each rule is exactly what it was before the key existed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from coordinator.errors import InvalidTopicError

LEADER_RACKS_KEY: Final = "leader_racks"
LEADER_RACKS_MAX: Final = 16
RACK_CHARS_MAX: Final = 100  # a rack name's length, for nodes and readers too (``models.validate_rack``)


def parse_leader_racks(value: object) -> tuple[str, ...]:
    """A client's ``leader_racks``: a list of at most ``LEADER_RACKS_MAX`` distinct non-empty rack
    names (``InvalidTopicError`` naming ``config.leader_racks`` otherwise). An empty list is no
    preference, as is the key's absence."""
    field = f"config.{LEADER_RACKS_KEY}"
    if not isinstance(value, list) or len(value) > LEADER_RACKS_MAX:
        raise InvalidTopicError(f"{field} must be a list of at most {LEADER_RACKS_MAX} rack names, "
                                f"not {str(value)[:60]!r}", field=field)
    racks = []
    for rack in value:
        if not isinstance(rack, str) or not rack or len(rack) > RACK_CHARS_MAX or not rack.isprintable():
            raise InvalidTopicError(f"{field} must name racks as printable text of 1 to {RACK_CHARS_MAX} "
                                    f"characters, not {str(rack)[:60]!r}", field=field)
        if rack in racks:
            raise InvalidTopicError(f"{field} names rack {rack!r} twice", field=field)
        racks.append(rack)
    return tuple(racks)


def leader_racks(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The stored preference of a topic's config (checked when it was stored): empty for none."""
    value = config.get(LEADER_RACKS_KEY)
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(rack for rack in value if isinstance(rack, str))


def rack_rank(rack: str | None, racks: Sequence[str]) -> int:
    """0 for the first listed rack, 1 for the second, ...; ``len(racks)`` for any other."""
    if rack is not None and rack in racks:
        return racks.index(rack)
    return len(racks)


def node_ranks(node_racks: Mapping[int, str | None], racks: Sequence[str], nodes: Iterable[int] = ()) -> dict[int, int]:
    """Each node's rank (the nodes of ``node_racks`` and ``nodes``; a node of unknown rack ranks
    last)."""
    return {node: rack_rank(node_racks.get(node), racks) for node in {*node_racks, *nodes}}
