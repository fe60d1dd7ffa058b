"""Per-group metric series are bounded: past ``GROUP_SERIES_MAX`` groups only that many are
itemized (groups with members first) and the rest are counted as omitted."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from logbroker.state_metrics import GROUP_SERIES_MAX, GroupQueueCollector


class FakeGroups:
    def __init__(self, idle: int, active: int) -> None:
        self.summaries = [{"group": f"idle{i}", "members": 0, "generation": 1} for i in range(idle)]
        self.summaries += [{"group": f"active{i}", "members": 2, "generation": 3} for i in range(active)]

    def list_groups(self) -> list[dict[str, Any]]:
        return self.summaries

    def describe(self, group: str) -> dict[str, Any]:
        return {"offsets": [{"topic": "t", "partition": 0, "lag": 7}]}


class NoQueues:
    def names(self) -> list[str]:
        return []


def scrape(groups: FakeGroups) -> list[str]:
    registry = CollectorRegistry()
    registry.register(GroupQueueCollector(lambda: groups, NoQueues()))  # type: ignore[arg-type]
    return generate_latest(registry).decode().splitlines()


def test_few_groups_are_all_itemized():
    lines = scrape(FakeGroups(idle=3, active=2))
    assert len([x for x in lines if x.startswith("logbroker_group_members{")]) == 5
    assert "logbroker_groups 5.0" in lines and "logbroker_group_series_omitted 0.0" in lines


def test_past_the_bound_active_groups_come_first_and_the_rest_are_counted():
    idle, active = GROUP_SERIES_MAX, 10
    lines = scrape(FakeGroups(idle=idle, active=active))
    itemized = [x for x in lines if x.startswith("logbroker_group_members{")]
    assert len(itemized) == GROUP_SERIES_MAX
    assert len([x for x in itemized if 'group="active' in x]) == active
    assert len([x for x in lines if x.startswith("logbroker_group_lag{")]) == GROUP_SERIES_MAX
    assert f"logbroker_groups {float(idle + active)}" in lines
    assert f"logbroker_group_series_omitted {float(active)}" in lines
