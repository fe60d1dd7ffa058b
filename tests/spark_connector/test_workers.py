"""``register`` checks Spark's Python workers on the driver: a session whose workers run a Python
without pyarrow fails at once with ``WorkerEnvironmentError`` and one line saying what to set, not
deep inside the first query, and so does one whose workers do not start; workers running another
path to a good Python pass.

The sessions start in a child process (a fresh JVM), so that ``PYSPARK_PYTHON``, read when a
SparkContext starts, is the test's own and no other module's session is in the way."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

from tests.conftest import ROOT
from tests.spark_connector.conftest import _check_java

SESSIONS_TIMEOUT_S = 600
SCRIPT = """
import json, os, sys
from pyspark.sql import SparkSession
from spark_connector import WorkerEnvironmentError
from spark_connector.session import local_session

out = {}
os.environ["PYSPARK_PYTHON"] = sys.argv[1]
try:
    local_session("workers-without-pyarrow")
except WorkerEnvironmentError as exc:
    out["error"] = str(exc)
out["stopped"] = SparkSession.getActiveSession() is None
os.environ["PYSPARK_PYTHON"] = sys.argv[3]
try:
    local_session("workers-that-do-not-start")
except WorkerEnvironmentError as exc:
    out["no_worker"] = str(exc)
os.environ["PYSPARK_PYTHON"] = sys.argv[2]
spark = local_session("workers-with-pyarrow")
out["good_python"] = spark.sparkContext.pythonExec
spark.stop()
print(json.dumps(out))
"""


def _wrapper(path: str, *args: str) -> str:
    """An executable that runs this interpreter with ``args`` first (by its own path, so a
    virtualenv stays a virtualenv)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'#!/bin/sh\nexec {sys.executable} {" ".join(args)} "$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_register_says_what_to_set_when_workers_lack_pyarrow(tmp_path):
    _check_java()
    # -S: no site-packages, so no pyarrow (spark_connector still comes from PYTHONPATH, pyspark from Spark).
    bare = _wrapper(str(tmp_path / "python-without-site"), "-S")
    good = _wrapper(str(tmp_path / "python-by-another-path"))
    missing = str(tmp_path / "no-such-python")
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("PYSPARK_PYTHON", None)
    result = subprocess.run([sys.executable, "-c", SCRIPT, bare, good, missing], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=SESSIONS_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    error = out.get("error")
    assert error is not None, "register did not refuse workers without pyarrow"
    assert "\n" not in error and f"({bare}) cannot import pyarrow:" in error
    assert "PYSPARK_PYTHON" in error and sys.executable in error
    assert out["stopped"], "local_session left the refused session running"
    assert out["good_python"] == good
    no_worker = out.get("no_worker")
    assert no_worker is not None and "\n" not in no_worker, no_worker
    assert f"({missing}) fail to run a task (java.io.IOException: " in no_worker  # Spark's own reason
    assert "PYSPARK_PYTHON" in no_worker
