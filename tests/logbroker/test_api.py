"""The front door's pure parts: the one ``acks`` check and its one message, a call's deadline as
a bound on a wait, and the HTTP route table agreeing with the operations it hands to the front
door (their access and quota are the ones ``BrokerApi`` applies)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from http_api import groups, queues, records  # noqa: F401  (registers the routes)
from http_api.routing import ROUTES, route
from logbroker.api_types import ACKS, ACKS_SHOWN_MAX, GROUP_OPERATIONS, OPERATIONS, CallContext, check_acks
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.errors import InvalidRequestError


@pytest.mark.parametrize("acks", ACKS)
def test_each_acks_value_passes_as_itself(acks: str) -> None:
    assert check_acks(acks) == acks


@given(st.text(max_size=200).filter(lambda value: value not in ACKS))
def test_any_other_acks_is_refused_with_one_bounded_message(acks: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        check_acks(acks)
    assert str(refused.value) == f"acks must be 0, 1 or all, not {acks[:ACKS_SHOWN_MAX]!r}"


def context(deadline: float | None) -> CallContext:
    return CallContext(Principal("ann", "user"), QuotaLimits(), deadline)


@given(st.integers(0, 10**7), st.floats(0, 10**4), st.floats(-100, 10**4))
def test_a_wait_never_outlasts_the_deadline(wanted_ms: int, now: float, left_s: float) -> None:
    waited = context(now + left_s).wait_ms(wanted_ms, now)
    assert 0 <= waited <= wanted_ms
    assert waited <= max(0.0, left_s * 1000)
    assert context(None).wait_ms(wanted_ms, now) == wanted_ms


def test_records_queue_and_group_member_calls_go_through_the_front_door_with_its_access_and_quota() -> None:
    served = {(entry.method, entry.path): entry for entry in ROUTES if entry.front_door is not None}
    assert set(served) == {("POST", "/v1/topics/{name}/records"),
                           ("GET", "/v1/topics/{name}/partitions/{partition}/records"),
                           ("GET", "/v1/topics/{name}/partitions/{partition}/offsets"),
                           ("POST", "/v1/queues/{name}/messages"), ("POST", "/v1/queues/{name}/receive"),
                           ("POST", "/v1/queues/{name}/ack"), ("POST", "/v1/queues/{name}/nack"),
                           ("GET", "/v1/queues/{name}"),
                           ("POST", "/v1/groups/{group}/members"),
                           ("POST", "/v1/groups/{group}/members/{member}/heartbeat"),
                           ("DELETE", "/v1/groups/{group}/members/{member}"),
                           ("POST", "/v1/groups/{group}/offsets")}
    for entry in served.values():
        assert entry.front_door is not None
        if entry.front_door in GROUP_OPERATIONS:
            assert (entry.access, entry.quota) == ("group_read", None)
        else:
            assert (entry.access, entry.quota) == OPERATIONS[entry.front_door]  # type: ignore[index]


def test_a_front_door_route_declaring_other_access_cannot_be_registered() -> None:
    with pytest.raises(AssertionError, match="needs access and quota"):
        route("POST", "/v1/topics/{name}/elsewhere", "x", access="read", quota="produce", front_door="publish")


def test_a_group_front_door_route_must_declare_the_group_access_it_needs() -> None:
    with pytest.raises(AssertionError, match="needs access and quota"):
        route("POST", "/v1/groups/{group}/elsewhere", "x", access="group_manage", front_door="group_join")
