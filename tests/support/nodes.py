"""Real node processes for tests: ``python -m logbroker serve`` on 127.0.0.1 with port 0.

A ``NodeProcess`` waits (bounded) for the ready line, exposes the URL, and is always stopped by
PID: SIGTERM first (graceful), SIGKILL if it does not exit in time, even when a test fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Final

from tests.conftest import ROOT

READY: Final = re.compile(r"^logbroker ready http=(\S+) node=(\d+)$")
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 15.0


class NodeProcess:
    def __init__(self, data_dir: str, *extra: str, node_id: int = 1) -> None:
        self.data_dir = data_dir
        self.args = [sys.executable, "-m", "logbroker", "serve", "--auth", "off", "--http-host", "127.0.0.1",
                     "--http-port", "0", "--rpc-port", "0", "--node-id", str(node_id), "--data-dir", data_dir,
                     "--maintenance-interval-ms", "200", *extra]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.stderr_lines: list[str] = []

    def start(self) -> NodeProcess:
        env = {**os.environ, "PYTHONPATH": ROOT}
        self.proc = subprocess.Popen(self.args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            match = READY.match(line.strip())
            if match:
                self.url = match.group(1)
                return self
        self.kill()
        raise RuntimeError(f"node did not become ready; stderr: {''.join(self.stderr_lines[-20:])}")

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL after ``STOP_TIMEOUT_S``. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> NodeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.kill()
