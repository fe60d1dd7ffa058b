"""Client processes for tests: started with the checkout on PYTHONPATH, their stdout lines
collected by a thread, stopped (SIGTERM, then SIGKILL after a bound) and reaped by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.conftest import ROOT

STOP_TIMEOUT_S = 15.0
LINES_MAX = 1_000_000


class ClientProcess:
    def __init__(self, module: str, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                if len(self.lines) < LINES_MAX:
                    self.lines.append(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.stderr) < 1000:
                self.stderr.append(line)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.lines if kind is None or e.get("event") == kind]

    def terminate(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
