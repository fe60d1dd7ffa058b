"""Holding limits without I/O: counts per user and kind, given back however the hold ends,
admins unlimited, and refusals that name the limit."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.auth.usage import Usage, check_group_limit, check_member_limit
from logbroker.config import NodeConfig
from logbroker.errors import InvalidRequestError, TooManyRequestsError

ANN, BOB, ROOT = Principal("ann", "user"), Principal("bob", "user"), Principal("root", "admin")
LIMITS = QuotaLimits(streams_max=2, long_polls_max=1, groups_max=3, group_members_max=0)


def test_holds_are_counted_per_user_and_kind_and_given_back():
    usage = Usage()
    with usage.hold(ANN, LIMITS, "streams"), usage.hold(ANN, LIMITS, "streams"):
        with pytest.raises(TooManyRequestsError, match="the limit streams_max is 2") as refused, \
                usage.hold(ANN, LIMITS, "streams"):
            pass
        assert refused.value.extra["limit"] == "streams_max"
        assert usage.held("ann", "streams") == 2
        with usage.hold(ANN, LIMITS, "long_polls"), usage.hold(BOB, LIMITS, "streams"):
            assert usage.held("bob", "streams") == 1
        with usage.hold(ROOT, LIMITS, "streams"), usage.hold(ROOT, LIMITS, "streams"), \
                usage.hold(ROOT, LIMITS, "streams"):
            pass
    with pytest.raises(RuntimeError), usage.hold(ANN, LIMITS, "streams"):
        raise RuntimeError("the stream failed")
    assert usage.held("ann", "streams") == 0 and usage.held("bob", "streams") == 0


def test_group_checks_for_the_groups_code():
    check_group_limit(ANN, LIMITS, 2)
    with pytest.raises(TooManyRequestsError, match="holds 3 consumer groups; the limit groups_max is 3"):
        check_group_limit(ANN, LIMITS, 3)
    check_group_limit(ROOT, LIMITS, 10_000)
    check_member_limit(ANN, LIMITS, 10_000)  # 0: unlimited


def test_creates_of_one_user_are_serialized_and_locks_do_not_pile_up():
    usage = Usage()
    order: list[str] = []

    async def create(user: str, name: str) -> None:
        async with usage.creating(user):
            order.append(f"{name}+")
            await asyncio.sleep(0.01)
            order.append(f"{name}-")

    async def main() -> None:
        await asyncio.gather(create("ann", "a1"), create("ann", "a2"), create("bob", "b1"))

    asyncio.run(main())
    assert order.index("a1-") < order.index("a2+") and order.index("b1+") < order.index("a1-")
    assert usage._locks == {}


def test_node_defaults_and_bad_values():
    config = NodeConfig()
    assert (config.quota_streams_max, config.quota_topics_max) == (100, 1000)
    with pytest.raises(InvalidRequestError, match="quota_streams_max must not be negative"):
        NodeConfig(quota_streams_max=-1)
