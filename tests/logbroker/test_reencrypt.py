"""``logbroker keys reencrypt`` on a real node's data: every record stays readable, the old key can
go, a running node's data is refused, and a kill -9 at any point of the rewrite loses nothing."""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logbroker.cli.command import main
from segments.batch import iter_batches
from segments.encryption import open_batch, sealing_key
from segments.key_ring import KeyRing, load_ring, write_ring
from tests.conftest import ROOT
from tests.http_api.conftest import Http
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

RECORDS = 1500
KILL_ROUNDS = 4
POLL_S = 0.002
ROUND_TIMEOUT_S = 60.0


def keys_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "logbroker", "keys", *args], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def fill(data_dir: str, keys: str) -> list[str]:
    """A stopped node's data: RECORDS records of topic ``t`` in many small segments, under key 1."""
    values = [f"value-{i:05d}-" + "x" * 40 for i in range(RECORDS)]
    with NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", 201, body={"name": "t", "config": {"segment_bytes": 4096}})
        for i in range(0, RECORDS, 30):
            http.json("POST", "/v1/topics/t/records", body={"records": [{"value": v} for v in values[i:i + 30]]})
    return values


def segments(data_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(data_dir, "t-0", "*.log")))


def key_ids(data_dir: str) -> list[int | None]:
    out = []
    for path in segments(data_dir):
        data = Path(path).read_bytes()
        out += [sealing_key(data[p:p + h.size_bytes]) for p, h in iter_batches(data)]
    return out


def stored_record_count(data_dir: str, ring: KeyRing) -> int:
    """Records in the segment files, every batch whole, checksummed and opened with ``ring``."""
    count = 0
    for path in segments(data_dir):
        data = Path(path).read_bytes()
        for position, header in iter_batches(data):
            open_batch(data[position:position + header.size_bytes], ring)
            count += header.record_count
    return count


def read_all(url: str) -> list[str]:
    http, values, offset = Http(url), [], 0
    while True:
        body = http.json("GET", f"/v1/topics/t/partitions/0/records?offset={offset}&max_bytes=1048576")
        values += [r["value"] for r in body["records"]]
        if body["next_offset"] == offset:
            return values
        offset = body["next_offset"]


def test_keys_create_rotate_remove(tmp_path: Path, capsys: object) -> None:
    path = str(tmp_path / "ring")
    assert main(["keys", "create", "--out", path]) == 0
    assert main(["keys", "create", "--out", path]) == 1  # never replaces a ring
    assert main(["keys", "rotate", "--file", path]) == 0
    ring = load_ring(path)
    assert ring.current == 2 and set(ring.keys) == {1, 2} and oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert main(["keys", "remove", "--file", path, "--id", "2"]) == 1  # the current key stays
    assert main(["keys", "remove", "--file", path, "--id", "1"]) == 0
    assert set(load_ring(path).keys) == {2}


def test_keys_create_makes_a_missing_directory_and_refuses_an_unwritable_one_clearly(tmp_path: Path,
                                                                                     capsys: pytest.CaptureFixture[str]
                                                                                     ) -> None:
    path = tmp_path / "new" / "dir" / "ring"
    assert main(["keys", "create", "--out", str(path)]) == 0
    assert set(load_ring(str(path)).keys) == {1} and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    capsys.readouterr()
    assert main(["keys", "create", "--out", str(blocked / "ring")]) == 1
    err = capsys.readouterr().err
    assert "cannot write the key ring" in err and "Traceback" not in err


def test_reencrypt_moves_every_batch_to_the_current_key_so_the_old_one_can_go(tmp_path: Path) -> None:
    data_dir, keys = str(tmp_path / "data"), str(tmp_path / "ring")
    write_ring(keys, KeyRing({1: os.urandom(32)}, 1))
    values = fill(data_dir, keys)
    assert len(segments(data_dir)) > 10 and set(key_ids(data_dir)) == {1}
    sizes = [os.path.getsize(p) for p in segments(data_dir)]
    assert main(["keys", "rotate", "--file", keys]) == 0
    with NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys) as node:
        refused = keys_cli("reencrypt", "--data-dir", data_dir, "--file", keys)
        _, err = refused.communicate(timeout=60)
        assert refused.returncode == 1 and "in use" in err  # a running node's data is not touched
        assert read_all(node.url) == values
    assert main(["keys", "reencrypt", "--data-dir", data_dir, "--file", keys]) == 0
    assert set(key_ids(data_dir)) == {2}
    assert [os.path.getsize(p) for p in segments(data_dir)] == sizes  # positions, so indexes, unchanged
    assert main(["keys", "remove", "--file", keys, "--id", "1"]) == 0
    with NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys) as node:
        assert read_all(node.url) == values
        http = Http(node.url)
        assert http.json("GET", "/v1/topics/t/partitions/0/records?offset=700&max_records=1")["records"][0][
            "value"] == values[700]


def test_kill_9_during_reencryption_loses_nothing(tmp_path: Path) -> None:
    original, keys = str(tmp_path / "original"), str(tmp_path / "ring")
    write_ring(keys, KeyRing({1: os.urandom(32)}, 1))
    values = fill(original, keys)
    assert main(["keys", "rotate", "--file", keys]) == 0
    ring = load_ring(keys)
    rng = random.Random(30)
    partial = 0
    for round_ in range(KILL_ROUNDS):
        data_dir = str(tmp_path / f"round-{round_}")
        shutil.copytree(original, data_dir)
        process = keys_cli("reencrypt", "--data-dir", data_dir, "--file", keys)
        deadline = time.monotonic() + ROUND_TIMEOUT_S
        while 2 not in _first_keys(data_dir) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
        time.sleep(rng.uniform(0, 0.05))  # a random point of the rewrite
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        found = set(key_ids(data_dir))
        partial += found == {1, 2}
        assert stored_record_count(data_dir, ring) == RECORDS  # every batch whole and readable
    assert partial >= 1, "no kill landed inside a rewrite"
    data_dir = str(tmp_path / f"round-{KILL_ROUNDS - 1}")
    with NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys) as node:
        assert read_all(node.url) == values  # the node opens the half-rewritten data
    assert not glob.glob(os.path.join(data_dir, "t-0", "*.tmp"))  # the aside file, if any, is gone
    assert main(["keys", "reencrypt", "--data-dir", data_dir, "--file", keys]) == 0  # and the rerun finishes
    assert set(key_ids(data_dir)) == {2}
    write_ring(keys, ring.without(1))
    with NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys) as node:
        assert read_all(node.url) == values


def _first_keys(data_dir: str) -> set[int | None]:
    """The key of each segment's first batch (a cheap look at the rewrite's progress)."""
    out = set()
    for path in segments(data_dir):
        with open(path, "rb") as f:
            head = f.read(100)
        if len(head) >= 69:
            out.add(sealing_key(head) if head[25] & 0x40 else None)
    return out
