"""One node process per data directory: the lock alone, and a second node refused at start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from logbroker.client.sync import SyncClient
from logbroker.data_dir_lock import LOCK_NAME, DataDirInUseError, DataDirLock
from tests.conftest import ROOT
from tests.support.nodes import NodeProcess

TIMEOUT_S = 60


def test_a_second_holder_is_refused_until_the_first_releases(tmp_path):
    data_dir = str(tmp_path / "node")
    with DataDirLock(data_dir):
        assert os.path.exists(os.path.join(data_dir, LOCK_NAME))
        with pytest.raises(DataDirInUseError, match=f"pid {os.getpid()}"):
            DataDirLock(data_dir).acquire()
    with DataDirLock(data_dir):
        pass


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    data_dir = str(tmp_path / "node")
    script = textwrap.dedent(f"""
        import sys, time
        from logbroker.data_dir_lock import DataDirLock
        DataDirLock({data_dir!r}).acquire()
        print("held", flush=True)
        time.sleep(60)
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": ROOT})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DataDirInUseError, match=f"pid {holder.pid}"):
            DataDirLock(data_dir).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(TIMEOUT_S)
        with DataDirLock(data_dir):
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(TIMEOUT_S)
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_second_node_on_a_data_dir_in_use_exits_and_the_first_keeps_its_data(tmp_path):
    data_dir = str(tmp_path / "node")
    with NodeProcess(data_dir) as first, SyncClient(first.url) as client:
        client.create_topic("locked", partitions=1)
        client.produce("locked", [{"value": "kept", "partition": 0}])
        second = subprocess.run(
            [sys.executable, "-m", "logbroker", "serve", "--data-dir", data_dir, "--auth", "off",
             "--http-port", "0", "--rpc-port", "0", "--grpc-port", "0"],
            capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S,
            env={k: v for k, v in os.environ.items() if not k.startswith("LOGBROKER_")} | {"PYTHONPATH": ROOT})
        assert second.returncode == 2, second.stderr
        assert "in use by another process" in second.stderr and f"pid {first.pid}" in second.stderr
        with urllib.request.urlopen(f"{first.url}/v1/topics/locked/partitions/0/records?offset=0",
                                    timeout=TIMEOUT_S) as answer:
            assert [r["value"] for r in json.load(answer)["records"]] == ["kept"]
