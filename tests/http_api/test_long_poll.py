"""Long-poll: a fetch waiting at the log end returns as soon as a record arrives (no polling loop
on the server), and returns empty once ``wait_ms`` passes with nothing."""

from __future__ import annotations

import threading
import time

import pytest

BATCH = "application/vnd.logbroker.batch"
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def topic(http):
    http.json("POST", "/v1/topics", 201, body={"name": "poll", "partitions": 1})
    return "poll"


def test_waiting_fetch_returns_when_a_record_arrives(http, topic):
    results: list[tuple[float, dict]] = []

    def wait() -> None:
        started = time.monotonic()
        body = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0&wait_ms={WAIT_MS}")
        results.append((time.monotonic() - started, body))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    assert not results, "the fetch must wait while the log is empty"
    http.json("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": "wake"}]})
    waiter.join(timeout=WAIT_MS / 1000)
    assert results, "the fetch did not return"
    elapsed, body = results[0]
    assert [r["value"] for r in body["records"]] == ["wake"]
    assert elapsed < WAIT_MS / 1000 / 2, "it returned because of the record, not the timeout"


def test_many_waiters_all_wake_on_one_produce(http, topic):
    end = http.json("GET", f"/v1/topics/{topic}/partitions/0/offsets?at=latest")["offset"]
    got: list[int] = []
    lock = threading.Lock()

    def wait(raw: bool) -> None:
        path = f"/v1/topics/{topic}/partitions/0/records?offset={end}&wait_ms={WAIT_MS}"
        if raw:
            reply = http.call("GET", path, headers={"Accept": BATCH})
            next_offset = int(reply.headers["x-logbroker-next-offset"])
        else:
            next_offset = http.json("GET", path)["next_offset"]
        with lock:
            got.append(next_offset)

    threads = [threading.Thread(target=wait, args=(i % 2 == 0,)) for i in range(40)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    http.json("POST", f"/v1/topics/{topic}/records", body={"records": [{"value": "all"}]})
    for t in threads:
        t.join(timeout=WAIT_MS / 1000)
    assert got == [end + 1] * 40


def test_wait_expires_with_an_empty_answer(http, topic):
    end = http.json("GET", f"/v1/topics/{topic}/partitions/0/offsets?at=latest")["offset"]
    started = time.monotonic()
    body = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset={end}&wait_ms=300")
    assert body["records"] == [] and body["next_offset"] == end
    assert time.monotonic() - started >= 0.3
