"""The node's default per-user limits as a share of its budgets: a quarter of the partition
budget (at most the old default of 4,000) and of the file system; explicit values stand."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.auth.bootstrap import node_limits
from logbroker.auth.shares import PARTITIONS_PER_USER_MAX, partitions_share
from logbroker.config import NodeConfig


@given(st.integers(64, 10_000_000))
def test_a_user_at_the_default_cannot_hold_the_node_budget(budget):
    share = partitions_share(budget)
    assert 1 <= share <= budget // 4 and share <= PARTITIONS_PER_USER_MAX


def test_auto_defaults_are_shares_and_explicit_values_stand():
    auto = node_limits(NodeConfig(), node_partitions_max=5_000, disk_bytes=400 * 2**30)
    assert auto.partitions_max == 1_250 and auto.storage_bytes_max == 100 * 2**30
    assert node_limits(NodeConfig(), node_partitions_max=10**6, disk_bytes=None).partitions_max == 4_000
    assert node_limits(NodeConfig(), node_partitions_max=100, disk_bytes=None).storage_bytes_max == 0
    explicit = node_limits(NodeConfig(quota_partitions_max=9_000, quota_storage_bytes_max=0),
                           node_partitions_max=100, disk_bytes=1000)
    assert (explicit.partitions_max, explicit.storage_bytes_max) == (9_000, 0)
