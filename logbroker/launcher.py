"""Start ``logbroker serve`` as a child process and wait for its ready line.

Used by the benchmarks, the tests and (later) ``make cluster``: the node listens on 127.0.0.1 with
port 0 and announces its real address in the ready line. ``stop()`` sends SIGTERM and waits,
then SIGKILLs after a bound; the process is always reaped by PID.
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

READY: Final = re.compile(r"^logbroker ready http=(\S+) node=(\d+)$")
START_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 15.0
STDERR_LINES_MAX: Final = 10_000


def cluster_args(coordinator_url: str, certs_dir: str, node_id: int, *, cluster_token: str,
                 lease_ttl_ms: int) -> tuple[str, ...]:
    """The flags that make a node a member of the cluster at ``coordinator_url``: the internal RPC
    with mutual TLS (``certs_dir`` as ``logbroker certs`` writes it, node ``node_id``'s certificate)
    and the shared cluster token."""
    return ("--coordinator", coordinator_url, "--lease-ttl-ms", str(lease_ttl_ms), "--cluster-token", cluster_token,
            "--rpc-tls-ca-file", os.path.join(certs_dir, "ca.pem"),
            "--rpc-tls-cert-file", os.path.join(certs_dir, f"node-{node_id}.pem"),
            "--rpc-tls-key-file", os.path.join(certs_dir, f"node-{node_id}.key"))


class NodeProcess:
    def __init__(self, data_dir: str, *extra: str, node_id: int = 1, cwd: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = [sys.executable, "-m", "logbroker", "serve", "--auth", "off", "--http-host", "127.0.0.1",
                     "--http-port", "0", "--rpc-port", "0", "--node-id", str(node_id), "--data-dir", data_dir,
                     *extra]
        self.cwd = cwd
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.stderr_lines: list[str] = []

    def start(self) -> NodeProcess:
        self.proc = subprocess.Popen(self.args, cwd=self.cwd, env=self.env or dict(os.environ),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
            if len(self.stderr_lines) < STDERR_LINES_MAX:
                self.stderr_lines.append(line)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

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
