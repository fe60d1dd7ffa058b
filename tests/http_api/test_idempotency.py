"""Produce de-duplication on one node (DESIGN §4): a produce or queue send with an
``Idempotency-Key`` is stored once within the topic's ``dedup_window_ms``, a prebuilt batch with a
producer id and sequence likewise, also after the node was killed and started again (the window is
rebuilt from the log). Keys are placed by their hash; a reused key with other records is 409; bad
keys and windows are 400 and change nothing."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segments.batch import ProducerRecord, encode_batch
from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess

BATCH = "application/vnd.logbroker.batch"


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("dedup"))) as process:
        yield process


def _http(process: NodeProcess) -> Http:
    return Http(process.url)


def _end(http: Http, topic: str, partition: int) -> int:
    answer = http.json("GET", f"/v1/topics/{topic}/partitions/{partition}/offsets?at=latest")
    offset: int = answer["offset"]
    return offset


def _produce(http: Http, topic: str, records: list[dict[str, object]], key: str | None, expect: int = 200) -> object:
    headers = {} if key is None else {"Idempotency-Key": key}
    return http.json("POST", f"/v1/topics/{topic}/records?acks=all", expect, body={"records": records},
                     headers=headers)


def test_a_retried_key_answers_the_first_offsets_and_stores_once(restartable: NodeProcess):
    http = _http(restartable)
    http.json("POST", "/v1/topics", 201, body={"name": "once", "partitions": 3})
    records = [{"value": "a"}, {"value": "b", "partition": 2}, {"value": "c", "key": "k"}]
    first = _produce(http, "once", records, "order-17")
    ends = [_end(http, "once", p) for p in range(3)]
    assert sum(ends) == 3
    again = _produce(http, "once", records, "order-17")
    assert again == first, "the retry answers the first offsets"
    assert [_end(http, "once", p) for p in range(3)] == ends, "and stores nothing"
    other = _produce(http, "once", records, "order-18")
    assert other != first and sum(_end(http, "once", p) for p in range(3)) == 6
    assert _produce(http, "once", [{"value": "a"}], None) != _produce(http, "once", [{"value": "a"}], None), \
        "without a key every produce is stored"


def test_a_keyless_record_is_placed_by_the_idempotency_key(restartable: NodeProcess):
    http = _http(restartable)
    http.json("POST", "/v1/topics", 201, body={"name": "placed", "partitions": 8})
    answers = [_produce(http, "placed", [{"value": f"v{i}"}], f"place-{i}") for i in range(6)]
    again = [_produce(http, "placed", [{"value": f"v{i}"}], f"place-{i}") for i in range(6)]
    assert answers == again
    assert len({a["offsets"][0]["partition"] for a in answers}) > 1, "keys spread over partitions"  # type: ignore[index]


def test_a_reused_key_with_other_records_is_refused_and_stores_nothing(restartable: NodeProcess):
    http = _http(restartable)
    http.json("POST", "/v1/topics", 201, body={"name": "reused", "partitions": 1})
    _produce(http, "reused", [{"value": "one"}], "k1")
    reply = http.call("POST", "/v1/topics/reused/records", body={"records": [{"value": "x"}, {"value": "y"}]},
                      headers={"Idempotency-Key": "k1"})
    assert reply.status == 409 and reply.json()["code"] == "idempotency_conflict"
    assert _end(http, "reused", 0) == 1


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.sampled_from(["", "a b", "tab\there", "del\x7f", "caf\u00e9"]),
                 st.text(alphabet="ab", min_size=201, max_size=260),
                 st.tuples(st.text(alphabet="xyz", min_size=1, max_size=5), st.sampled_from(" \t\x7f\u00e9"),
                           st.text(alphabet="xyz", min_size=1, max_size=5)).map("".join)))
def test_bad_keys_are_refused(restartable: NodeProcess, key: str):
    http = _http(restartable)
    if http.call("GET", "/v1/topics/badkeys").status == 404:
        http.json("POST", "/v1/topics", 201, body={"name": "badkeys", "partitions": 1})
    before = _end(http, "badkeys", 0)
    try:
        reply = http.call("POST", "/v1/topics/badkeys/records", body={"records": [{"value": "x"}]},
                          headers={"Idempotency-Key": key})
    except ValueError:  # http.client refuses some header values itself: nothing was sent
        return
    assert reply.status == 400, (key, reply.status)
    assert _end(http, "badkeys", 0) == before


def test_bad_windows_are_refused(restartable: NodeProcess):
    http = _http(restartable)
    for window in (-1, "60", 86_400_001, True):
        reply = http.call("POST", "/v1/topics", body={"name": "w", "config": {"dedup_window_ms": window}})
        assert reply.status == 400, window
    assert http.call("GET", "/v1/topics/w").status == 404


def test_a_zero_window_stores_every_retry(restartable: NodeProcess):
    http = _http(restartable)
    http.json("POST", "/v1/topics", 201, body={"name": "nowindow", "partitions": 1,
                                               "config": {"dedup_window_ms": 0}})
    _produce(http, "nowindow", [{"value": "x"}], "same")
    time.sleep(0.01)  # a few milliseconds on, a window of 0 has passed
    _produce(http, "nowindow", [{"value": "x"}], "same")
    assert _end(http, "nowindow", 0) == 2


def test_a_producer_batch_and_a_queue_send_are_stored_once_even_after_a_kill(tmp_path):
    data_dir = str(tmp_path / "node")
    with NodeProcess(data_dir) as first:
        http = _http(first)
        issued = http.json("POST", "/v1/producers")  # an identity outlives the node that issued it
        pid, epoch = issued["producer_id"], issued["producer_epoch"]
        batch = encode_batch([ProducerRecord(b"p1"), ProducerRecord(b"p2")], producer_id=pid, producer_epoch=epoch,
                             base_sequence=0)
        http.json("POST", "/v1/topics", 201, body={"name": "batches", "partitions": 1})
        http.json("POST", "/v1/topics", 201, body={"name": "jobs", "partitions": 1, "kind": "queue"})
        stored = http.json("POST", "/v1/topics/batches/records?partition=0&acks=1", raw=batch, content_type=BATCH)
        sent = http.json("POST", "/v1/queues/jobs/messages?acks=1", body={"records": [{"value": "job"}]},
                         headers={"Idempotency-Key": "job-1"})
        os.kill(first.pid, signal.SIGKILL)
        first.kill()
    with NodeProcess(data_dir) as second:  # the window comes back from the log
        http = _http(second)
        assert http.json("POST", "/v1/topics/batches/records?partition=0&acks=1", raw=batch,
                         content_type=BATCH) == stored
        assert _end(http, "batches", 0) == 2
        following = encode_batch([ProducerRecord(b"p3")], producer_id=pid, producer_epoch=epoch, base_sequence=2)
        assert http.json("POST", "/v1/topics/batches/records?partition=0", raw=following,
                         content_type=BATCH)["offsets"][0]["offset"] == 2
        assert http.json("POST", "/v1/queues/jobs/messages?acks=1", body={"records": [{"value": "job"}]},
                         headers={"Idempotency-Key": "job-1"}) == sent
        got = http.json("POST", "/v1/queues/jobs/receive", body={"max_messages": 10, "wait_ms": 500})
        assert [m["value"] for m in got["messages"]] == ["job"]
