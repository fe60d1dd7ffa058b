"""``GET /v1/usage`` through a real node with auth on: what two users produce, fetch and stream is
counted per user, topic and hour, the bytes equal what their quotas were charged, storage goes
to the owner, each user sees only their own rows, CSV and days work, bad queries are 400, gRPC
and queues are counted as HTTP and topics are, ``/metrics`` carries each user's totals, and the
counts survive a restart (they are stored, not only in memory)."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import time
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from grpc_api import stubs
from segments.batch import ProducerRecord, encode_batch
from tests.grpc_api.conftest import auth
from tests.http_api.conftest import Http
from tests.http_api.test_user_limits import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.grpc_calls import publish, subscribe
from tests.support.nodes import NodeProcess

pb, _ = stubs.load()

HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("usage")), *AUTH_ARGS, "--auto-create", "on") as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, ADMIN, login(http, ADMIN, ADMIN_PASSWORD))


@pytest.fixture(scope="module")
def users(http: Http, admin: As) -> tuple[As, As]:
    alice, bob = make_user(http, admin, "alice"), make_user(http, admin, "bob")
    alice.json("POST", "/v1/topics", 201, body={"name": "alice.t", "partitions": 1})
    bob.json("POST", "/v1/topics", 201, body={"name": "bob.t", "partitions": 1})
    return alice, bob


def rows_of(caller: As, **query: object) -> list[dict]:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    return caller.json("GET", "/v1/usage" + (f"?{params}" if params else ""))["usage"]


def test_a_users_produce_and_fetch_are_counted_as_their_quota_saw_them(node, http, admin, users) -> None:
    alice, bob = users
    body = {"records": [{"value": "x" * 100} for _ in range(5)]}
    produced = alice.call("POST", "/v1/topics/alice.t/records", body=body)
    assert produced.status == 200
    fetched = alice.call("GET", "/v1/topics/alice.t/partitions/0/records?offset=0")
    assert fetched.status == 200 and len(fetched.json()["records"]) == 5
    (row,) = [r for r in rows_of(alice) if r["topic"] == "alice.t"]
    assert row["user"] == "alice" and row["start_ms"] % HOUR_MS == 0
    assert row["records_in"] == 5 and row["records_out"] == 5 and row["requests"] == 2
    assert row["bytes_in"] == len(json.dumps(body).encode()), "the bytes counted: the body the quota is charged"
    assert row["bytes_out"] == len(fetched.data), "the bytes counted are the bytes the fetch quota is charged"
    assert row["storage_bytes"] > 0, "alice owns alice.t: its bytes on disk are hers"
    assert all(r["user"] == "alice" for r in rows_of(alice)), "a user sees their own rows"
    forbidden = bob.call("GET", "/v1/usage?user=alice")
    assert forbidden.status == 403
    everyone = {(r["user"], r["topic"]) for r in rows_of(admin)}
    assert ("alice", "alice.t") in everyone and ("bob", "bob.t") in everyone, "an admin sees every user"
    assert {r["user"] for r in rows_of(admin, user="bob")} == {"bob"}


def test_requests_naming_topics_that_do_not_exist_are_counted_under_star(node, http, users) -> None:
    """A flood of made-up names must not fill the usage ledger with them: with auto-create on, a
    first produce with a bad body reaches the handler for a name that then stays missing (400);
    its bytes count under ``*``."""
    _, bob = users
    for n in range(3):
        assert bob.call("POST", f"/v1/topics/nothing-{n}/records", body={"records": "no"}).status == 400
    topics = {r["topic"] for r in rows_of(bob)}
    assert "*" in topics and not any(t.startswith("nothing-") for t in topics)


def test_a_stream_counts_its_records_bytes_and_time(node, http, users) -> None:
    alice, _ = users
    before = next((r for r in rows_of(alice) if r["topic"] == "alice.t"), None)
    with contextlib.closing(alice.http.connect()) as connection:
        connection.request("GET", "/v1/topics/alice.t/partitions/0/stream?offset=0",
                           headers={"Authorization": f"Bearer {alice.token}", "Accept": "text/event-stream"})
        response = connection.getresponse()
        assert response.status == 200
        got = b""
        deadline = time.monotonic() + 10
        while got.count(b"event: record") < 5 and time.monotonic() < deadline:
            got += response.read1(65536)
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    while True:  # the node notices the client gone, then counts the stream's time
        row = next(r for r in rows_of(alice) if r["topic"] == "alice.t")
        if row["stream_seconds"] > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert row["stream_seconds"] >= 0.3
    assert before is None or row["records_out"] >= before["records_out"] + 5
    assert row["bytes_out"] >= (before["bytes_out"] if before else 0) + len(got)


def test_csv_and_days(node, http, admin, users) -> None:
    alice, _ = users
    reply = alice.call("GET", "/v1/usage?by=day", headers={"Accept": "text/csv"})
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(reply.data.decode())))
    assert parsed and all(r["user"] == "alice" for r in parsed)
    assert all(int(r["start_ms"]) % (24 * HOUR_MS) == 0 for r in parsed)
    by_day = {r["topic"]: r for r in rows_of(alice, by="day")}
    assert int(parsed[0]["bytes_in"]) == by_day[parsed[0]["topic"]]["bytes_in"]


@pytest.mark.parametrize("query", ["by=week", "from=10&to=5", "from=-1", "to=abc", "user=a%2Fb",
                                   f"from=0&to={401 * 24 * HOUR_MS}"])
def test_bad_queries_are_400(node, http, admin, query) -> None:
    reply = admin.call("GET", f"/v1/usage?{query}")
    assert reply.status == 400, (query, reply.data)
    assert reply.headers["content-type"].startswith("application/problem+json")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.dictionaries(st.sampled_from(["from", "to", "by", "user"]),
                             st.text(st.characters(codec="ascii", exclude_characters="&#%+"), max_size=20)))
def test_arbitrary_queries_never_crash(node, http, admin, query) -> None:
    reply = admin.call("GET", "/v1/usage?" + urlencode(query))
    assert reply.status in (200, 400), (query, reply.status, reply.data[:200])


def test_a_prebuilt_batch_counts_the_records_it_holds(node, http, admin, users) -> None:
    alice, _ = users
    batch = encode_batch([ProducerRecord(b"v%d" % i) for i in range(7)])
    alice.json("POST", "/v1/topics", 201, body={"name": "alice.batch", "partitions": 1})
    stored = alice.call("POST", "/v1/topics/alice.batch/records?partition=0", raw=batch,
                        headers={"Content-Type": "application/vnd.logbroker.batch"})
    assert stored.status == 200, stored.data[:300]
    (row,) = [r for r in rows_of(alice) if r["topic"] == "alice.batch"]
    assert row["records_in"] == 7 and row["bytes_in"] == len(batch) and row["requests"] == 1


def test_grpc_publish_and_subscribe_are_counted_as_http_calls_are(node, http, admin, users) -> None:
    alice, _ = users
    alice.json("POST", "/v1/topics", 201, body={"name": "alice.grpc", "partitions": 1})
    request = pb.PublishRequest(topic="alice.grpc", records=[pb.Record(value=b"g" * 50) for _ in range(4)])
    asyncio.run(publish(node.grpc_address, request, auth(alice.token)))
    async def held_open() -> None:
        """Nothing: given as ``then``, it keeps the stream open 0.3 s before it is read (a stream
        closed within the millisecond it opened rightly counts no time)."""

    got = asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="alice.grpc", partition=0, offset=0),
                                auth(alice.token), 4, then=held_open))
    assert len(got) == 4
    deadline = time.monotonic() + 10
    while True:  # the subscription's time is credited once the node sees it closed
        (row,) = [r for r in rows_of(alice) if r["topic"] == "alice.grpc"]
        if row["stream_seconds"] > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert row["user"] == "alice" and row["records_in"] == 4 and row["records_out"] == 4
    assert row["bytes_in"] == request.ByteSize(), "the bytes counted: the Publish the quota is charged"
    assert row["bytes_out"] > 4 * 50 and row["requests"] == 2 and row["stream_seconds"] > 0


def test_a_queues_sends_and_receives_are_counted_under_the_queue(node, http, admin, users) -> None:
    alice, _ = users
    alice.json("POST", "/v1/topics", 201, body={"name": "alice.jobs", "kind": "queue"})
    body = {"records": [{"value": f"job-{i}"} for i in range(3)]}
    sent = alice.call("POST", "/v1/queues/alice.jobs/messages", body=body)
    assert sent.status == 200, sent.data[:300]
    received = alice.call("POST", "/v1/queues/alice.jobs/receive", body={"max_messages": 3})
    assert received.status == 200 and len(received.json()["messages"]) == 3
    (row,) = [r for r in rows_of(alice) if r["topic"] == "alice.jobs"]
    assert row["records_in"] == 3 and row["records_out"] == 3 and row["requests"] == 2
    assert row["bytes_in"] == len(json.dumps(body).encode()) and row["bytes_out"] == len(received.data)


def test_metrics_carry_each_users_totals_as_the_usage_rows_sum_them(node, http, admin, users) -> None:
    """One node, started with this module: its per-user counters since start are the sums of the
    user's rows (every topic, every hour)."""
    alice, bob = users
    scrape = admin.call("GET", "/metrics")
    assert scrape.status == 200
    families = {f.name: f for f in text_string_to_metric_families(scrape.data.decode())}
    for user in (alice, bob):
        rows = rows_of(admin, user=user.name)
        for field in ("bytes_in", "records_in", "bytes_out", "records_out", "requests"):
            (sample,) = [s for s in families[f"logbroker_user_{field}"].samples
                         if s.name.endswith("_total") and s.labels == {"user": user.name}]
            assert sample.value == sum(r[field] for r in rows), (user.name, field)
    assert all(families[f"logbroker_user_{field}"].samples for field in ("records_in", "records_out"))


def test_usage_outlives_a_restart(node, http, admin, users) -> None:
    """The counts are written to the coordinator (the data dir here), not kept in memory only.
    (Last in the module: it stops the module's node.)"""
    before = next(r for r in rows_of(admin, user="alice") if r["topic"] == "alice.t")
    node.stop()
    with NodeProcess(node.data_dir, *AUTH_ARGS) as restarted:
        again = Http(restarted.url)
        after = next(r for r in rows_of(As(again, ADMIN, login(again, ADMIN, ADMIN_PASSWORD)), user="alice")
                     if r["topic"] == "alice.t")
    assert after["bytes_in"] >= before["bytes_in"] and after["records_out"] >= before["records_out"]

