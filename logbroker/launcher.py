"""Start ``logbroker serve`` as a child process and wait for its ready line.

Used by the benchmarks, the tests and ``make cluster`` (``logbroker.dev_cluster``): the node
listens on 127.0.0.1 with port 0 unless told otherwise and announces its real address in the
ready line. A reader thread drains the child's stdout (so the pipe never fills and the wait for
the ready line is bounded even when the child prints nothing); stderr is kept in memory
(bounded) or, given ``log_path``, written with stdout to that file. ``stop()`` sends SIGTERM and
waits, then SIGKILLs after a bound; the process is always reaped by PID.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Final

READY: Final = re.compile(r"^logbroker ready http=(\S+) grpc=(\S+)(?: kafka=(\S+))? node=(\d+)$")
START_TIMEOUT_S: Final = 60.0
STOP_TIMEOUT_S: Final = 15.0
STDERR_LINES_MAX: Final = 10_000
LOG_TAIL_BYTES: Final = 4_096


def cluster_args(coordinator_url: str, certs_dir: str, node_id: int, *, cluster_token: str | None,
                 lease_ttl_ms: int) -> tuple[str, ...]:
    """The flags that make a node a member of the cluster at ``coordinator_url``: the internal RPC
    with mutual TLS (``certs_dir`` as ``logbroker certs`` writes it, node ``node_id``'s certificate)
    and the shared cluster token (None: the caller gives it through the environment,
    ``LOGBROKER_CLUSTER_TOKEN``, which keeps it out of the process list)."""
    token = () if cluster_token is None else ("--cluster-token", cluster_token)
    return ("--coordinator", coordinator_url, "--lease-ttl-ms", str(lease_ttl_ms), *token,
            "--rpc-tls-ca-file", os.path.join(certs_dir, "ca.pem"),
            "--rpc-tls-cert-file", os.path.join(certs_dir, f"node-{node_id}.pem"),
            "--rpc-tls-key-file", os.path.join(certs_dir, f"node-{node_id}.key"))


def serve_args(data_dir: str, node_id: int, extra: Sequence[str]) -> list[str]:
    """``logbroker serve``'s flags: the node's id and data dir, the launcher's defaults (auth off,
    loopback, any free port) and ``extra``. A default ``extra`` gives again is left out, so the
    command line (what ``ps`` shows) names each of these flags once and reads as what runs."""
    given = {arg.partition("=")[0] for arg in extra if arg.startswith("--")}
    defaults = (("--node-id", str(node_id)), ("--data-dir", data_dir), ("--auth", "off"),
                ("--http-host", "127.0.0.1"), ("--http-port", "0"), ("--rpc-port", "0"))
    return [part for flag, value in defaults if flag not in given for part in (flag, value)] + list(extra)


class NodeProcess:
    def __init__(self, data_dir: str, *extra: str, node_id: int = 1, cwd: str | None = None,
                 env: dict[str, str] | None = None, log_path: str | None = None,
                 own_process_group: bool = False) -> None:
        """``log_path``: append the child's stdout and stderr to this file instead of keeping
        stderr in memory. ``own_process_group``: start the child in a process group of its own, so
        that a terminal's Ctrl-C reaches only the parent, which stops its children in order."""
        self.data_dir = data_dir
        self.node_id = node_id
        self.args = [sys.executable, "-m", "logbroker", "serve", *serve_args(data_dir, node_id, extra)]
        self.cwd = cwd
        self.env = env
        self.log_path = log_path
        self.own_process_group = own_process_group
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.grpc_address = ""
        self.kafka_address = ""  # when the node was started with --kafka-port
        self.stderr_lines: list[str] = []
        self._ready = threading.Event()
        self._log: IO[str] | None = None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> NodeProcess:
        """Start and wait (at most ``timeout_s``) for the ready line; killed and reaped on failure."""
        if self.log_path is not None:
            # Closed by the stdout reader at the end of the child's output.
            self._log = open(self.log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(self.args, cwd=self.cwd, env=self.env or dict(os.environ),
                                         stdout=subprocess.PIPE, stderr=self._log or subprocess.PIPE, text=True,
                                         process_group=0 if self.own_process_group else None)
        except BaseException:
            if self._log is not None:
                self._log.close()
            raise
        if self._log is None:
            threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        try:
            while not self._ready.wait(0.05):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"node {self.node_id} exited with {self.proc.returncode} before it was ready; "
                                       f"{self._tail()}")
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"node {self.node_id} not ready within {timeout_s:g} s; {self._tail()}")
        except BaseException:
            self.kill()
            raise
        return self

    def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if self._log is not None:
                self._log.write(line)
            if not self._ready.is_set():
                match = READY.match(line.strip())
                if match:
                    self.url, self.grpc_address = match.group(1), match.group(2)
                    self.kafka_address = match.group(3) or ""
                    self._ready.set()
        if self._log is not None:
            self._log.close()

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.stderr_lines) < STDERR_LINES_MAX:
                self.stderr_lines.append(line)

    def _tail(self) -> str:
        if self.log_path is None:
            return f"stderr: {''.join(self.stderr_lines[-20:])}"
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - LOG_TAIL_BYTES))
                return f"the end of {self.log_path}:\n{f.read().decode('utf-8', 'replace')}"
        except OSError as exc:
            return f"log {self.log_path}: {exc}"

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
