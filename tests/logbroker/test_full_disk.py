"""A node on a small filesystem of the test's own (a 40 MB tmpfs): fill it until a produce fails,
check the typed retriable answer, ``/readyz`` and the metrics, delete a topic while the disk is
full to free space, produce again, kill -9 and restart: every acknowledged record is there.

Mounting needs root; where it is not permitted the test is skipped with the reason, and the log's
own handling of short writes and ENOSPC is proven by ``tests/segments/test_storage_faults.py``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess
from tests.support.processes import wait_for

DISK_MB = 40
VALUE = "x" * 1000
RECORDS_PER_BATCH = 100
PRODUCES_MAX = 2 * DISK_MB * 1024 * 1024 // (len(VALUE) * RECORDS_PER_BATCH)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[str]:
    mount_point = str(tmp_path / "disk")
    os.makedirs(mount_point)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", mount_point],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); "
                    "tests/segments/test_storage_faults.py covers the log with injected faults")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", mount_point], check=False)


def batch(tag: str) -> dict[str, object]:
    return {"records": [{"value": f"{tag}:{i}:{VALUE}", "partition": 0} for i in range(RECORDS_PER_BATCH)]}


def read_values(http: Http, topic: str) -> list[str]:
    values: list[str] = []
    offset = 0
    while True:
        body = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset={offset}&max_bytes=4194304")
        values += [r["value"] for r in body["records"]]
        if body["next_offset"] == offset:
            return values
        offset = body["next_offset"]


def test_a_full_disk_loses_no_acknowledged_record_and_recovers_by_itself(small_disk):
    data_dir = os.path.join(small_disk, "node")
    acked: list[str] = []
    with NodeProcess(data_dir) as first:
        http = Http(first.url)
        http.json("POST", "/v1/topics", 201, body={"name": "ballast", "partitions": 1})
        for i in range(100):  # about 10 MB that a deletion can give back
            http.json("POST", "/v1/topics/ballast/records?acks=all", body=batch(f"ballast{i}"))
        http.json("POST", "/v1/topics", 201, body={"name": "data", "partitions": 1, "config": {"flush": "always"}})
        full = None
        for i in range(PRODUCES_MAX):
            body = batch(f"before{i}")
            reply = http.call("POST", "/v1/topics/data/records?acks=all", body=body)
            if reply.status != 200:
                full = reply
                break
            acked += [r["value"] for r in body["records"]]  # type: ignore[index]
        assert full is not None, f"{PRODUCES_MAX} produces never filled a {DISK_MB} MB disk"
        problem = full.json()
        assert full.status == 507 and problem["code"] == "storage_full" and problem["retriable"] is True, problem
        assert problem["type"].endswith("/storage_full") and int(full.headers["retry-after"]) >= 1
        assert http.call("POST", "/v1/topics/data/records?acks=all", body=batch("refused")).status == 507

        ready = http.call("GET", "/readyz")
        assert ready.status == 503 and ready.json()["storage"]["full"] is True, ready.data
        assert "logbroker_storage_full 1.0" in http.call("GET", "/metrics").data.decode()

        http.json("DELETE", "/v1/topics/ballast", 204)  # works on the full disk, and frees it
        for i in range(30):
            body = batch(f"after{i}")
            http.json("POST", "/v1/topics/data/records?acks=all", body=body)
            acked += [r["value"] for r in body["records"]]  # type: ignore[index]
        wait_for(lambda: http.call("GET", "/readyz").status == 200, 10, "readiness once space returned")
        assert "logbroker_storage_full 0.0" in http.call("GET", "/metrics").data.decode()
        first.kill()

    with NodeProcess(data_dir) as second:
        http = Http(second.url)
        names = {t["name"] for t in http.json("GET", "/v1/topics")["topics"]}
        assert "ballast" not in names and "data" in names
        assert read_values(http, "data") == acked
        assert not [n for n in os.listdir(data_dir) if n.startswith("ballast")]
