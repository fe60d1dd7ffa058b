"""The public gRPC API against a real node: Publish and Subscribe with a token (keys, values,
headers, positions, a subscriber following the tail, a consumer group committing what it got),
refusals mapped to gRPC codes (no token, a forged one, another user's topic, an unknown topic, bad
input that changes nothing), server reflection, and the ready line and /v1/cluster naming the
address."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grpc_api import stubs
from tests.grpc_api.conftest import ACCESS_RECHECK_MS, auth
from tests.support.auth import bearer
from tests.support.grpc_calls import publish, subscribe

pb, pb_grpc = stubs.load()
FORGED = ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiIsInJvbGVzIjpbImFkbWluIl19."
          "c2lnbmF0dXJlLW9mLXNvbWVvbmUtZWxzZQ")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def code_of(coro: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        run(coro)
    return refused.value.code()


def test_the_ready_line_and_the_cluster_name_the_grpc_address(node, http, admin_token):
    host, port = node.grpc_address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    (me,) = http.json("GET", "/v1/cluster", headers=bearer(admin_token))["nodes"]
    assert me["grpc_address"] == node.grpc_address


def test_publish_and_subscribe_with_a_token(node, http, admin_token):
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.orders", "partitions": 2}, headers=bearer(admin_token))
    request = pb.PublishRequest(topic="grpc.orders", acks="all", records=[
        pb.Record(key=b"k1", value=b"first", headers={"trace": b"t-1"}, partition=1),
        pb.Record(value=b"\x00\xffbinary", partition=1, timestamp_ms=1_790_000_000_000),
        pb.Record(key=b"k2", value=b"second", partition=0)])
    answer = run(publish(node.grpc_address, request, auth(admin_token)))
    assert [(p.partition, p.offset) for p in answer.positions] == [(1, 0), (1, 1), (0, 0)]
    got = run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="grpc.orders", partition=1, offset=0),
                        auth(admin_token), 2))
    assert [(r.topic, r.partition, r.offset, r.key, r.value, dict(r.headers)) for r in got] == [
        ("grpc.orders", 1, 0, b"k1", b"first", {"trace": b"t-1"}),
        ("grpc.orders", 1, 1, b"", b"\x00\xffbinary", {})]
    assert got[1].timestamp_ms == 1_790_000_000_000
    fetched = http.json("GET", "/v1/topics/grpc.orders/partitions/1/records?offset=0&encoding=base64",
                        headers=bearer(admin_token))
    assert [base64.b64decode(r["value_b64"]) for r in fetched["records"]] == [b"first", b"\x00\xffbinary"]


def test_a_subscriber_from_the_end_gets_what_is_published_after_it(node, http, admin_token):
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.tail", "partitions": 1}, headers=bearer(admin_token))
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.tail", records=[pb.Record(value=b"old")]),
                auth(admin_token)))

    async def later() -> None:
        for n in range(3):
            await publish(node.grpc_address, pb.PublishRequest(topic="grpc.tail", records=[
                pb.Record(value=f"new-{n}".encode())]), auth(admin_token))

    got = run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="grpc.tail", partition=0, offset=-1),
                        auth(admin_token), 3, then=later))
    assert [(r.offset, r.value) for r in got] == [(1, b"new-0"), (2, b"new-1"), (3, b"new-2")]
    earliest = run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="grpc.tail", partition=0, offset=-2),
                             auth(admin_token), 1))
    assert earliest[0].value == b"old"


def test_a_group_subscriber_gets_its_partitions_and_commits_what_it_got(node, http, admin_token):
    headers = bearer(admin_token)
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.grouped", "partitions": 2}, headers=headers)
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.grouped", records=[
        pb.Record(value=f"v{n}".encode(), partition=n % 2) for n in range(6)]), auth(admin_token)))

    async def read_then_linger() -> list[Any]:
        """Six records, then a moment with the stream open: the node counts a record as delivered
        once gRPC has taken it; one cancelled before that is left for the next reader (at least once)."""
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            call = pb_grpc.BrokerStub(channel).Subscribe(
                pb.SubscribeRequest(topic="grpc.grouped", group="grpc.readers"), metadata=auth(admin_token),
                timeout=20)
            out = [await call.read() for _ in range(6)]
            await asyncio.sleep(0.5)
            call.cancel()
            return out

    got = run(read_then_linger())
    assert sorted(r.value for r in got) == [f"v{n}".encode() for n in range(6)]
    described: dict[str, Any] = {}
    for _ in range(50):  # the stream's end commits and leaves
        described = http.json("GET", "/v1/groups/grpc.readers", headers=headers)
        if not described["members"] and all(o["committed_offset"] == 3 for o in described["offsets"]):
            break
        run(asyncio.sleep(0.1))
    assert described["members"] == []
    assert sorted((o["partition"], o["committed_offset"]) for o in described["offsets"]) == [(0, 3), (1, 3)]


def test_calls_without_a_valid_token_are_unauthenticated(node):
    request = pb.PublishRequest(topic="grpc.orders", records=[pb.Record(value=b"x")])
    assert code_of(publish(node.grpc_address, request)) == grpc.StatusCode.UNAUTHENTICATED
    assert code_of(publish(node.grpc_address, request, auth(FORGED))) == grpc.StatusCode.UNAUTHENTICATED
    assert code_of(subscribe(node.grpc_address, pb.SubscribeRequest(topic="grpc.orders"), (), 1)) == \
        grpc.StatusCode.UNAUTHENTICATED


def test_another_users_topic_is_permission_denied_and_an_unknown_one_not_found(node, http, admin_token, user_token):
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.private", "partitions": 1}, headers=bearer(admin_token))
    request = pb.PublishRequest(topic="grpc.private", records=[pb.Record(value=b"x")])
    assert code_of(publish(node.grpc_address, request, auth(user_token))) == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(subscribe(node.grpc_address, pb.SubscribeRequest(topic="grpc.private"), auth(user_token), 1)) \
        == grpc.StatusCode.PERMISSION_DENIED
    unknown = pb.PublishRequest(topic="grpc.nowhere", records=[pb.Record(value=b"x")])
    assert code_of(publish(node.grpc_address, unknown, auth(admin_token))) == grpc.StatusCode.NOT_FOUND
    latest = http.json("GET", "/v1/topics/grpc.private", headers=bearer(admin_token))["partitions"][0]["latest_offset"]
    assert latest == 0


def test_bad_input_is_invalid_argument_and_changes_nothing(node, http, admin_token):
    headers = bearer(admin_token)
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.strict", "partitions": 1}, headers=headers)
    cases = [
        pb.PublishRequest(topic="grpc.strict", records=[]),
        pb.PublishRequest(topic="grpc.strict", acks="most", records=[pb.Record(value=b"x")]),
        pb.PublishRequest(topic="grpc.strict", records=[pb.Record(value=b"x", headers={"x-logbroker-producer": b"1"})]),
        pb.PublishRequest(topic="../grpc.strict", records=[pb.Record(value=b"x")]),
        pb.PublishRequest(topic="", records=[pb.Record(value=b"x")]),
        pb.PublishRequest(topic="grpc.strict", records=[pb.Record(value=b"x", partition=7)]),
    ]
    for request in cases:
        assert code_of(publish(node.grpc_address, request, auth(admin_token))) == grpc.StatusCode.INVALID_ARGUMENT
    for bad in (pb.SubscribeRequest(topic="grpc.strict", offset=-3), pb.SubscribeRequest(topic="grpc.strict",
                                                                                          partition=-1)):
        assert code_of(subscribe(node.grpc_address, bad, auth(admin_token), 1)) == grpc.StatusCode.INVALID_ARGUMENT
    assert http.json("GET", "/v1/topics/grpc.strict", headers=headers)["partitions"][0]["latest_offset"] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(topic=st.text(max_size=300))
def test_any_topic_name_is_refused_cleanly_or_unknown(node, admin_token, topic):
    """Whatever the name (path tricks, control characters, huge), an answer with a clear status."""
    request = pb.PublishRequest(topic=topic, records=[pb.Record(value=b"x")])
    try:
        run(publish(node.grpc_address, request, auth(admin_token)))
    except grpc.aio.AioRpcError as exc:
        assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), exc
        assert dict(exc.trailing_metadata() or ()).get("x-logbroker-error-code")
    else:
        pytest.fail(f"publishing to {topic!r} (no such topic) succeeded")


def test_reflection_lists_the_broker_service(node):
    async def services() -> list[str]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
            async for response in responses:
                return [s.name for s in response.list_services_response.service]
        return []

    assert "logbroker.v1.Broker" in run(services())


def test_subscribe_batches_gives_the_same_records_a_fetch_at_a_time(node, http, admin_token):
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.batches", "partitions": 1}, headers=bearer(admin_token))
    for chunk in range(3):
        run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.batches", records=[
            pb.Record(value=f"b{chunk}-{n}".encode()) for n in range(50)]), auth(admin_token)))

    async def read() -> list[list[bytes]]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            call = pb_grpc.BrokerStub(channel).SubscribeBatches(
                pb.SubscribeRequest(topic="grpc.batches", partition=0, offset=10), metadata=auth(admin_token),
                timeout=20)
            batches, total = [], 0
            async for batch in call:
                batches.append([r.value for r in batch.records])
                total += len(batch.records)
                if total >= 140:
                    break
            call.cancel()
            return batches

    batches = run(read())
    assert [v for b in batches for v in b] == [f"b{c}-{n}".encode() for c in range(3) for n in range(50)][10:]
    assert len(batches) < 140  # several records per message


def test_a_publish_retried_with_its_idempotency_key_answers_the_first_positions_and_stores_once(node, http,
                                                                                                admin_token):
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.once", "partitions": 1}, headers=bearer(admin_token))
    request = pb.PublishRequest(topic="grpc.once", idempotency_key="order-17", acks="all",
                                records=[pb.Record(value=b"pay"), pb.Record(value=b"ship")])
    first = run(publish(node.grpc_address, request, auth(admin_token)))
    again = run(publish(node.grpc_address, request, auth(admin_token)))
    assert [(p.partition, p.offset) for p in again.positions] == [(p.partition, p.offset) for p in first.positions]
    assert http.json("GET", "/v1/topics/grpc.once", headers=bearer(admin_token))["partitions"][0]["latest_offset"] == 2
    other = pb.PublishRequest(topic="grpc.once", idempotency_key="order-17", records=[pb.Record(value=b"refund")])
    assert code_of(publish(node.grpc_address, other, auth(admin_token))) == grpc.StatusCode.FAILED_PRECONDITION


def test_an_idempotency_key_belongs_to_the_publishing_user(node, http, admin_token):
    admin = bearer(admin_token)
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.keys", "partitions": 1}, headers=admin)
    guest = user_with_quotas(http, admin, "grpc-key-guest", {})
    http.json("PUT", "/v1/topics/grpc.keys/acl", body={"user": "grpc-key-guest", "permissions": ["write"]},
              headers=admin)
    by_guest = run(publish(node.grpc_address, pb.PublishRequest(
        topic="grpc.keys", idempotency_key="order-17", records=[pb.Record(value=b"g1"), pb.Record(value=b"g2")]),
        auth(guest)))
    by_owner = run(publish(node.grpc_address, pb.PublishRequest(
        topic="grpc.keys", idempotency_key="order-17", records=[pb.Record(value=b"owner")]), auth(admin_token)))
    assert [p.offset for p in by_guest.positions] == [0, 1] and [p.offset for p in by_owner.positions] == [2], \
        "the owner's write is stored: neither answered with the guest's offsets nor refused as a conflict"


def _details(exc: grpc.aio.AioRpcError) -> dict[str, Any]:
    """What a generated client reads from gRPC's rich error model (``grpc-status-details-bin``)."""
    status = rpc_status.from_call(exc)
    assert status is not None and status.code == exc.code().value[0]
    out: dict[str, Any] = {}
    for detail in status.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo):
            if detail.Is(kind.DESCRIPTOR):
                unpacked = kind()
                detail.Unpack(unpacked)
                out[kind.__name__] = unpacked
    return out


def user_with_quotas(http: Any, admin: dict[str, str], name: str, quotas: dict[str, int]) -> str:
    """A new user with these quotas: their token."""
    password = f"{name}-password"
    http.json("POST", "/v1/users", 201, body={"username": name, "password": password, "quotas": quotas},
              headers=admin)
    return str(http.json("POST", "/v1/auth/token", 200, body={"username": name, "password": password})["access_token"])


def test_over_quota_is_resource_exhausted_with_retry_info_and_stores_nothing(node, http, admin_token):
    admin = bearer(admin_token)
    token = user_with_quotas(http, admin, "grpc.slow", {"produce_bytes_per_s": 1000})
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.slow.lane", "partitions": 1}, headers=bearer(token))
    request = pb.PublishRequest(topic="grpc.slow.lane", records=[pb.Record(value=b"x" * 5_000)])
    run(publish(node.grpc_address, request, auth(token)))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        run(publish(node.grpc_address, request, auth(token)))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    details = _details(refused.value)
    assert details["ErrorInfo"].reason == "too_many_requests" and details["ErrorInfo"].domain == "logbroker"
    delay = details["RetryInfo"].retry_delay
    assert 0 < delay.seconds + delay.nanos / 1e9 <= 6  # 5 KB over a 1 KB/s quota
    trailing = dict(refused.value.trailing_metadata() or ())
    assert int(trailing["retry-after-ms"]) == delay.seconds * 1000 + delay.nanos // 1_000_000
    described = http.json("GET", "/v1/topics/grpc.slow.lane", headers=admin)
    assert described["partitions"][0]["latest_offset"] == 1


def test_a_refused_publish_is_charged_for_what_it_sent(node, http, admin_token):
    token = user_with_quotas(http, bearer(admin_token), "grpc.refused", {"produce_bytes_per_s": 50_000})
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.refused.lane"}, headers=bearer(token))
    invalid = pb.PublishRequest(topic="grpc.refused.lane", acks="bogus", records=[pb.Record(value=b"x" * 150_000)])
    assert code_of(publish(node.grpc_address, invalid, auth(token))) == grpc.StatusCode.INVALID_ARGUMENT
    small = pb.PublishRequest(topic="grpc.refused.lane", records=[pb.Record(value=b"small")])
    assert code_of(publish(node.grpc_address, small, auth(token))) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_refusal_that_is_not_retriable_has_error_info_and_no_retry_info(node, admin_token):
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.nowhere", records=[pb.Record(value=b"x")]),
                    auth(admin_token)))
    details = _details(refused.value)
    assert details["ErrorInfo"].reason == "unknown_topic" and "RetryInfo" not in details


def test_subscriptions_count_against_the_callers_streams_quota(node, http, admin_token):
    """One stream allowed: a second gRPC Subscribe, or an HTTP push stream, is refused while the
    first is open; once it ends, a new one is served."""
    token = user_with_quotas(http, bearer(admin_token), "grpc.one.stream", {"streams_max": 1})
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.one.stream", "partitions": 1}, headers=bearer(token))
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.one.stream", records=[pb.Record(value=b"r")]),
                auth(token)))
    request = pb.SubscribeRequest(topic="grpc.one.stream", partition=0, offset=0)

    async def while_one_is_open() -> tuple[grpc.StatusCode, int]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            stub = pb_grpc.BrokerStub(channel)
            first = stub.Subscribe(request, metadata=auth(token), timeout=20)
            assert (await first.read()).value == b"r"
            second = stub.Subscribe(request, metadata=auth(token), timeout=20)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await second.read()
            pushed = await asyncio.to_thread(http.call, "GET", "/v1/topics/grpc.one.stream/partitions/0/stream",
                                             headers=bearer(token))
            first.cancel()
            return refused.value.code(), pushed.status

    assert run(while_one_is_open()) == (grpc.StatusCode.RESOURCE_EXHAUSTED, 429)
    for _ in range(50):  # the node lets the first go once it sees the cancel
        try:
            got = run(subscribe(node.grpc_address, request, auth(token), 1))
            break
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            run(asyncio.sleep(0.1))
    assert [r.value for r in got] == [b"r"]


def test_a_group_subscription_refused_the_group_is_permission_denied_before_any_stream_limit(node, http,
                                                                                             admin_token):
    """A caller at their ``streams_max`` who may read the topic but not the group (another user
    claimed it) is told PERMISSION_DENIED, not RESOURCE_EXHAUSTED: the group is authorized before a
    stream slot is taken."""
    token = user_with_quotas(http, bearer(admin_token), "grpc.group.refused", {"streams_max": 1})
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.group.refused", "partitions": 1}, headers=bearer(token))
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.group.refused", records=[pb.Record(value=b"r")]),
                auth(token)))
    http.json("POST", "/v1/groups/grpc.group.admins/members", headers=bearer(admin_token),  # the admin claims it
              body={"topics": ["grpc.group.refused"]})

    async def with_one_stream_open() -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            stub = pb_grpc.BrokerStub(channel)
            first = stub.Subscribe(pb.SubscribeRequest(topic="grpc.group.refused", partition=0, offset=0),
                                   metadata=auth(token), timeout=20)
            assert (await first.read()).value == b"r"
            grouped = stub.Subscribe(pb.SubscribeRequest(topic="grpc.group.refused", group="grpc.group.admins"),
                                     metadata=auth(token), timeout=20)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await grouped.read()
            first.cancel()
            return refused.value.code()

    assert run(with_one_stream_open()) == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize("revoke", ["grant", "tokens"])
def test_an_open_subscription_ends_once_access_is_revoked(node, http, admin_token, revoke):
    """A reader granted read on another user's topic subscribes; the grant is revoked (or every
    token of the reader is): the open stream ends with PERMISSION_DENIED (or UNAUTHENTICATED)
    within a recheck and a long-poll (a record written meanwhile may still reach it)."""
    admin = bearer(admin_token)
    reader = f"grpc.revoked.{revoke}"
    token = user_with_quotas(http, admin, reader, {})
    topic = f"grpc.revocable.{revoke}"
    http.json("POST", "/v1/topics", 201, body={"name": topic, "partitions": 1}, headers=admin)
    http.json("PUT", f"/v1/topics/{topic}/acl", body={"user": reader, "permissions": ["read"]}, headers=admin)
    run(publish(node.grpc_address, pb.PublishRequest(topic=topic, records=[pb.Record(value=b"before")]),
                auth(admin_token)))

    async def read_until_ended() -> tuple[list[bytes], grpc.StatusCode, float]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            call = pb_grpc.BrokerStub(channel).Subscribe(pb.SubscribeRequest(topic=topic, partition=0, offset=0),
                                                         metadata=auth(token), timeout=30)
            got = [(await call.read()).value]
            if revoke == "grant":
                await asyncio.to_thread(http.json, "PUT", f"/v1/topics/{topic}/acl",
                                        body={"user": reader, "permissions": []}, headers=admin)
            else:
                await asyncio.to_thread(http.json, "POST", f"/v1/users/{reader}/revoke-tokens", headers=admin)
            revoked = time.monotonic()
            await publish(node.grpc_address, pb.PublishRequest(topic=topic, records=[pb.Record(value=b"after")]),
                          auth(admin_token))
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                while True:
                    message = await call.read()
                    if message is grpc.aio.EOF:
                        break
                    got.append(message.value)
            return got, ended.value.code(), time.monotonic() - revoked

    got, code, took_s = run(read_until_ended())
    assert code == (grpc.StatusCode.PERMISSION_DENIED if revoke == "grant" else grpc.StatusCode.UNAUTHENTICATED)
    assert took_s < (ACCESS_RECHECK_MS + 1_000) / 1000 + 2
    assert got[0] == b"before" and len(got) <= 2


@pytest.fixture(scope="module")
def fuzzed_topic(http, admin_token) -> str:
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.fuzzed", "partitions": 2}, headers=bearer(admin_token))
    return "grpc.fuzzed"


any_record = st.builds(
    lambda key, value, headers, partition, timestamp: pb.Record(
        key=key, value=value, headers=headers, timestamp_ms=timestamp,
        **({} if partition is None else {"partition": partition})),
    st.binary(max_size=8), st.binary(max_size=64),
    st.dictionaries(st.text(max_size=20) | st.sampled_from(["X-LogBroker-Origin", "x-logbroker-dlq"]),
                    st.binary(max_size=8), max_size=3),
    st.none() | st.integers(-1, 2) | st.integers(-2**31, 2**31 - 1),
    st.integers(0, 2**41) | st.integers(-2**63, 2**63 - 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(any_record, max_size=5), acks=st.sampled_from(["", "0", "1", "all", "most", "ALL"]))
@example(records=[pb.Record(value=b"stored", partition=1), pb.Record(value=b"spread")], acks="all")
def test_any_publish_is_stored_whole_or_refused_and_changes_nothing(node, http, admin_token, fuzzed_topic,
                                                                   records, acks):
    """A Publish either stores exactly its records (one position each, at the log's end) or is
    refused with a clear status and leaves every partition as it was."""
    def ends() -> list[int]:
        described = http.json("GET", f"/v1/topics/{fuzzed_topic}", headers=bearer(admin_token))
        return [p["latest_offset"] for p in sorted(described["partitions"], key=lambda p: p["partition"])]

    before = ends()
    request = pb.PublishRequest(topic=fuzzed_topic, acks=acks, records=records)
    try:
        answer = run(publish(node.grpc_address, request, auth(admin_token)))
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc
        assert ends() == before
        return
    after = ends()
    assert len(answer.positions) == len(records) and sum(after) - sum(before) == len(records)
    for position in answer.positions:
        assert before[position.partition] <= position.offset < after[position.partition]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(partition=st.integers(-1, 2) | st.integers(-2**31, 2**31 - 1),
       offset=st.integers(-3, 3) | st.integers(-2**63, 2**63 - 1),
       rack=st.sampled_from(["", "b"]) | st.text(max_size=120),
       group=st.sampled_from(["", "", "../g", "g" * 300, "bad\x00group"]))
@example(partition=0, offset=-1, rack="", group="")  # valid: waits for records past the end
@example(partition=0, offset=0, rack="b", group="")
def test_any_subscribe_request_is_served_or_refused_with_a_clear_status(node, admin_token, fuzzed_topic,
                                                                        partition, offset, rack, group):
    request = pb.SubscribeRequest(topic=fuzzed_topic, partition=partition, offset=offset, rack=rack, group=group)
    try:
        run(subscribe(node.grpc_address, request, auth(admin_token), 1, timeout_s=2))
    except grpc.aio.AioRpcError as exc:
        assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                              grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.DEADLINE_EXCEEDED), exc
        if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # a valid request waits for records
            assert dict(exc.trailing_metadata() or ()).get("x-logbroker-error-code")


def test_a_group_subscriber_gets_a_large_record_of_any_bytes(node, http, admin_token):
    """A record whose text form would be six times its size (control bytes escaped) reaches a
    group subscriber whole: the member stream behind it carries bytes as base64."""
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.large", "partitions": 1}, headers=bearer(admin_token))
    large = bytes(range(32)) * 20_000  # 640 KB of control bytes
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.large", records=[
        pb.Record(value=large, headers={"h": b"\x00"}), pb.Record(value=b"after")]), auth(admin_token)))
    got = run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="grpc.large", group="grpc.large.readers"),
                        auth(admin_token), 2))
    assert [r.value for r in got] == [large, b"after"] and dict(got[0].headers) == {"h": b"\x00"}


def test_one_users_group_subscriptions_do_not_delay_another_users(node, http, admin_token):
    """One user holds as many group subscriptions as their stream quota allows (100, as many as the
    node's internal HTTP client once had connections for everyone); another user's group
    subscription still starts and reads its records at once."""
    hog = user_with_quotas(http, bearer(admin_token), "grpc.group.hog", {"streams_max": 100})
    other = user_with_quotas(http, bearer(admin_token), "grpc.group.other", {})
    for token, topic in ((hog, "grpc.hog.topic"), (other, "grpc.other.topic")):
        http.json("POST", "/v1/topics", 201, body={"name": topic, "partitions": 1}, headers=bearer(token))
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.other.topic", records=[pb.Record(value=b"mine")]),
                auth(other)))

    async def while_the_hog_holds_its_streams() -> tuple[int, list[bytes]]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            stub = pb_grpc.BrokerStub(channel)
            held = [stub.Subscribe(pb.SubscribeRequest(topic="grpc.hog.topic", group=f"grpc.hog.{n}"),
                                   metadata=auth(hog), timeout=60) for n in range(100)]
            try:
                await asyncio.wait_for(asyncio.gather(*(call.initial_metadata() for call in held)), 40)
                opened = sum(not call.done() for call in held)
                call = stub.Subscribe(pb.SubscribeRequest(topic="grpc.other.topic", group="grpc.other.readers"),
                                      metadata=auth(other), timeout=10)
                return opened, [(await call.read()).value]
            finally:
                for call in held:
                    call.cancel()

    assert run(while_the_hog_holds_its_streams()) == (100, [b"mine"])


def _group_requests(http: Any, admin_token: str) -> int:
    """HTTP requests the node's listener answered on its group routes (its own /metrics)."""
    scraped = http.call("GET", "/metrics", headers=bearer(admin_token))
    assert scraped.status == 200
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in scraped.data.decode().splitlines()
               if line.startswith("logbroker_http_requests_total{") and 'route="/v1/groups' in line)


def test_a_group_subscription_sends_no_request_to_the_http_listener(node, http, admin_token):
    """The member joins, reads, commits and leaves through the group coordinator's own calls: the
    node's HTTP listener counts no group request meanwhile."""
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.direct", "partitions": 1}, headers=bearer(admin_token))
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.direct", records=[
        pb.Record(value=b"a"), pb.Record(value=b"b")]), auth(admin_token)))
    before = _group_requests(http, admin_token)

    async def read_then_leave() -> list[bytes]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            request = pb.SubscribeRequest(topic="grpc.direct", group="grpc.direct.g")
            call = pb_grpc.BrokerStub(channel).Subscribe(request, metadata=auth(admin_token), timeout=20)
            got = [(await call.read()).value for _ in range(2)]
            await asyncio.sleep(1.2)  # a commit is due after a second
            call.cancel()
            await asyncio.sleep(0.5)  # the call's end commits and leaves
            return got

    assert run(read_then_leave()) == [b"a", b"b"]
    assert _group_requests(http, admin_token) == before
    described = http.json("GET", "/v1/groups/grpc.direct.g", headers=bearer(admin_token))
    assert described["members"] == [] and [o["committed_offset"] for o in described["offsets"]] == [2]


def test_a_group_subscription_ends_once_read_on_its_topic_is_revoked(node, http, admin_token):
    """As for a partition: a member whose grant on the topic is revoked is refused within a recheck
    and a heartbeat interval, with PERMISSION_DENIED. What it was delivered while allowed is
    still committed, and its member leaves at once (decision 0413): the next member does not get
    it again."""
    admin = bearer(admin_token)
    token = user_with_quotas(http, admin, "grpc.group.revoked", {})
    http.json("POST", "/v1/topics", 201, body={"name": "grpc.group.revocable", "partitions": 1}, headers=admin)
    http.json("PUT", "/v1/topics/grpc.group.revocable/acl", body={"user": "grpc.group.revoked",
                                                                  "permissions": ["read"]}, headers=admin)
    run(publish(node.grpc_address, pb.PublishRequest(topic="grpc.group.revocable", records=[
        pb.Record(value=b"before")]), auth(admin_token)))

    async def read_until_ended() -> tuple[bytes, grpc.StatusCode]:
        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            call = pb_grpc.BrokerStub(channel).Subscribe(
                pb.SubscribeRequest(topic="grpc.group.revocable", group="grpc.group.revocable.g"),
                metadata=auth(token), timeout=30)
            first = (await call.read()).value
            await asyncio.sleep(0.1)  # gRPC has taken it: delivered
            await asyncio.to_thread(http.json, "PUT", "/v1/topics/grpc.group.revocable/acl",
                                    body={"user": "grpc.group.revoked", "permissions": []}, headers=admin)
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                while await call.read() is not grpc.aio.EOF:
                    pass
            return first, ended.value.code()

    assert run(read_until_ended()) == (b"before", grpc.StatusCode.PERMISSION_DENIED)
    described = http.json("GET", "/v1/groups/grpc.group.revocable.g", headers=admin)
    assert described["members"] == []
    assert [o["committed_offset"] for o in described["offsets"]] == [1]
