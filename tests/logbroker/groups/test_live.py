"""Other protocols' groups merged into the broker's group list and descriptions (pure)."""

from __future__ import annotations

from logbroker.groups.live import LiveGroup, live_group, merged_summary, merged_view

KAFKA = LiveGroup("stable", 3, "range", [
    {"member_id": "k1", "protocol": "kafka", "principal": "ann", "assignment": {"t": [0, 1]}},
    {"member_id": "k2", "protocol": "kafka", "principal": "bob", "assignment": {"t": [2]}}])


class Source:
    def __init__(self, groups: dict[str, LiveGroup]) -> None:
        self.groups = groups

    def live(self, name: str, now_ms: int) -> LiveGroup | None:
        return self.groups.get(name)


def test_a_group_with_only_kafka_members_takes_their_state_and_count() -> None:
    summary = {"group": "g", "state": "empty", "generation": 0, "strategy": None, "members": 0}
    assert merged_summary(summary, KAFKA) == {"group": "g", "state": "stable", "generation": 3, "strategy": "range",
                                              "members": 2}
    assert merged_summary(summary, None) is summary


def test_a_group_with_members_of_both_keeps_its_own_state_and_counts_all() -> None:
    summary = {"group": "g", "state": "stable", "generation": 7, "strategy": "sticky", "members": 1}
    assert merged_summary(summary, KAFKA) == {**summary, "members": 3}


def test_a_description_lists_the_kafka_members_and_their_partitions_owners() -> None:
    view = {"group": "g", "state": "empty", "generation": 0, "strategy": None, "members": [], "assignment": {},
            "offsets": [{"topic": "t", "partition": p, "member_id": None, "committed_offset": 1} for p in (0, 2, 5)]}
    merged = merged_view(view, KAFKA)
    assert [m["member_id"] for m in merged["members"]] == ["k1", "k2"] and merged["state"] == "stable"
    assert [o["member_id"] for o in merged["offsets"]] == ["k1", "k2", None]
    assert view["members"] == [] and view["offsets"][0]["member_id"] is None  # the input is left as it was


def test_the_first_source_that_knows_a_group_answers() -> None:
    sources = [Source({}), Source({"g": KAFKA})]
    assert live_group(sources, "g", 0) is KAFKA and live_group(sources, "h", 0) is None
