"""Groups whose members speak another protocol (Kafka's consumer groups, ``kafka_api``), shown
beside the broker's own in ``GET /v1/groups`` and the console.

A protocol that hosts groups of its own registers a ``LiveGroups`` on the node (``Node.live_groups``);
the HTTP layer merges what it says into the group list and a group's description. Its members carry
``"protocol"`` (e.g. ``"kafka"``); their committed offsets are the broker's own, so the offsets and
lag a description shows are already theirs. Pure: the merge functions take values and return new
ones."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol


class LiveGroup(NamedTuple):
    """One group as its protocol's coordinator holds it now."""

    state: str  # "stable", "preparing-rebalance", "completing-rebalance" or "empty"
    generation: int
    strategy: str | None  # the assignor the members chose
    members: Sequence[dict[str, Any]]  # as GET /v1/groups/{group} shows a member, with "protocol"


class LiveGroups(Protocol):
    def live(self, name: str, now_ms: int) -> LiveGroup | None: ...


def live_group(sources: Iterable[LiveGroups], name: str, now_ms: int) -> LiveGroup | None:
    """The first source's view of group ``name`` that has one."""
    for source in sources:
        found = source.live(name, now_ms)
        if found is not None:
            return found
    return None


def merged_summary(summary: dict[str, Any], live: LiveGroup | None) -> dict[str, Any]:
    """A ``GET /v1/groups`` row with the group's live members of another protocol counted in; their
    state, generation and strategy when the broker's own protocol has no members in it."""
    if live is None or not live.members:
        return summary
    own = int(summary.get("members", 0))
    merged = {**summary, "members": own + len(live.members)}
    if not own:
        merged.update(state=live.state, generation=live.generation, strategy=live.strategy)
    return merged


def merged_view(view: dict[str, Any], live: LiveGroup | None) -> dict[str, Any]:
    """A group's description with the members of another protocol listed after the broker's own,
    and the partitions they were assigned shown as theirs in ``offsets``."""
    if live is None or not live.members:
        return view
    merged = {**view, "members": [*view.get("members", []), *live.members]}
    if not view.get("members"):
        merged.update(state=live.state, generation=live.generation, strategy=live.strategy)
    owners = {(topic, partition): m["member_id"] for m in live.members
              for topic, partitions in m.get("assignment", {}).items() for partition in partitions}
    merged["offsets"] = [o if o.get("member_id") or (o["topic"], o["partition"]) not in owners
                         else {**o, "member_id": owners[(o["topic"], o["partition"])]}
                         for o in view.get("offsets", [])]
    return merged
