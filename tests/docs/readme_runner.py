"""Runs a Markdown file's blocks (``readme_blocks``), or the blocks of several files in reading order
(the documentation site's pages), as a person following them would, against real servers started
by their own blocks.

The blocks run in a scratch copy of the checkout: a temporary directory holding a symbolic link to
each top-level entry (``.venv`` links to the environment running the tests), so that what the
blocks write (``.data/``, ``certs/``, generated stubs) stays there and a person's own ``.data`` is
never touched. Documented ports are taken from free ones: the servers get them through the
settings the README documents for that (``RUN_PORT``/``RUN_GRPC_PORT``/``RUN_KAFKA_PORT`` for ``make run``, the
``CLUSTER_*_PORTS`` of ``make cluster``), and each block's text has the documented number replaced
by the one in use. Every shell block runs under ``set -eo pipefail`` with ``curl`` failing on an
HTTP error (``--fail-with-body``: what a person would read as a failure); variables set by one
block are there for the next of its section (``## ``), Python blocks of a section share one
interpreter. Background blocks run in process groups of their own and are stopped at the end as
by Ctrl-C (SIGINT, then SIGTERM, then SIGKILL, each bounded), and any process still working in the
scratch directory after that is killed by PID. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Final

from tests.docs.readme_blocks import Block, substitute_ports
from tests.support.etcd import free_ports

BLOCK_TIMEOUT_S: Final = 300.0
READY_TIMEOUT_S: Final = 240.0
STOP_TIMEOUT_S: Final = 30.0
OUTPUT_TAIL_CHARS: Final = 4_000
POLL_S: Final = 0.1
NOT_LINKED: Final = frozenset({".data", ".venv", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                               ".hypothesis", "test-artifacts"})
# Variables a shell sets for itself: never carried from one block to the next.
SHELL_OWN: Final = ("BASH*|COMP_*|DIRSTACK|EUID|FUNCNAME|GROUPS|HIST*|IFS|LINENO|OLDPWD|OPTARG|OPTERR|OPTIND|"
                    "PIPESTATUS|PPID|PS1|PS2|PS4|PWD|RANDOM|SECONDS|SHELLOPTS|SHLVL|SRANDOM|EPOCH*|UID|_|__*")
PYTHON_WORKER: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "readme_python.py")


@dataclasses.dataclass(frozen=True)
class Ports:
    """The ports a run uses in place of the documented ones, and the settings that move them."""

    run_http: int
    run_grpc: int
    cluster_http: tuple[int, int, int]
    cluster_rpc: tuple[int, int, int]
    cluster_grpc: tuple[int, int, int]
    etcd_client: int
    etcd_peer: int
    tls_example: int
    encryption_example: int
    run_kafka: int
    cluster_kafka: tuple[int, int, int]

    @classmethod
    def free(cls) -> Ports:
        ports = free_ports(19)
        return cls(ports[0], ports[1], (ports[2], ports[3], ports[4]), (ports[5], ports[6], ports[7]),
                   (ports[8], ports[9], ports[10]), ports[11], ports[12], ports[13], ports[14], ports[15],
                   (ports[16], ports[17], ports[18]))

    def env(self) -> dict[str, str]:
        return {"RUN_PORT": str(self.run_http), "RUN_GRPC_PORT": str(self.run_grpc),
                "RUN_KAFKA_PORT": str(self.run_kafka),
                "CLUSTER_HTTP_PORTS": ",".join(map(str, self.cluster_http)),
                "CLUSTER_RPC_PORTS": ",".join(map(str, self.cluster_rpc)),
                "CLUSTER_GRPC_PORTS": ",".join(map(str, self.cluster_grpc)),
                "CLUSTER_KAFKA_PORTS": ",".join(map(str, self.cluster_kafka)),
                "CLUSTER_ETCD_CLIENT_PORT": str(self.etcd_client), "CLUSTER_ETCD_PEER_PORT": str(self.etcd_peer)}

    def documented(self) -> dict[int, int]:
        """Documented port -> the port in use, for the numbers a block's text may name."""
        return {8080: self.run_http, 9092: self.run_grpc, 8081: self.cluster_http[0], 8082: self.cluster_http[1],
                8083: self.cluster_http[2], 9094: self.cluster_grpc[0], 9095: self.cluster_grpc[1],
                9096: self.cluster_grpc[2], 2379: self.etcd_client, 2380: self.etcd_peer, 8443: self.tls_example,
                8444: self.encryption_example, 9093: self.run_kafka, 9097: self.cluster_kafka[0],
                9098: self.cluster_kafka[1], 9099: self.cluster_kafka[2]}


@dataclasses.dataclass
class Outcome:
    block: Block
    ok: bool
    detail: str = ""  # why it failed, and the tail of its output

    def describe(self, file: str = "") -> str:
        file = self.block.file or file
        return f"{file} line {self.block.line} ({self.block.language}, section {self.block.section!r}): {self.detail}"


class _Background:
    def __init__(self, block: Block, proc: subprocess.Popen[bytes], log_path: str) -> None:
        self.block = block
        self.proc = proc
        self.log_path = log_path


class _Python:
    def __init__(self, proc: subprocess.Popen[str], replies: int, log_path: str) -> None:
        self.proc = proc
        self.replies = replies  # the read end of the worker's answer pipe
        self.buffered = b""
        self.log_path = log_path


class ReadmeRun:
    """One run of a file's blocks; use as a context manager so everything started is stopped."""

    def __init__(self, root: str, file: str, venv: str = sys.prefix) -> None:
        self.root = root
        self.file = file
        self.venv = venv
        self.ports = Ports.free()
        self.work = tempfile.mkdtemp(prefix="readme-run-")
        self.logs = os.path.join(self.work, ".readme-logs")
        os.makedirs(self.logs)
        for name in os.listdir(root):
            if name not in NOT_LINKED:
                os.symlink(os.path.join(root, name), os.path.join(self.work, name))
        self._link_venv(venv)
        self.base_env = {k: v for k, v in os.environ.items() if not k.startswith("LOGBROKER_")}
        self.base_env.update(self.ports.env())
        # The blocks run this checkout's code (a person's clone has it installed in .venv, editable).
        self.base_env["PYTHONPATH"] = root
        # The CLI's default URL is make run's documented one; with the port moved, name the node.
        self.base_env["LOGBROKER_URL"] = f"http://127.0.0.1:{self.ports.run_http}"
        self._background: list[_Background] = []
        self._python: _Python | None = None
        self._section: tuple[str, str] = ("", "")
        self._state = ""
        self._counter = 0

    def _link_venv(self, venv: str) -> None:
        """``.venv``: the test's environment, entry by entry, with install stamps of its own. They
        are new, so ``make`` sees the environment installed (it is: the tests run in it) and never
        reinstalls the package into that environment from the scratch directory, which would point
        its editable install at a directory about to be deleted."""
        scratch = os.path.join(self.work, ".venv")
        os.makedirs(scratch)
        stamps = {name for name in os.listdir(venv) if name.startswith(".")} | _makefile_stamps(self.root)
        for name in os.listdir(venv):
            if not name.startswith("."):
                os.symlink(os.path.join(venv, name), os.path.join(scratch, name))
        for name in stamps:  # every stamp a make target checks: made now, newer than any source
            with open(os.path.join(scratch, name), "w", encoding="utf-8"):
                pass

    def __enter__(self) -> ReadmeRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running -------------------------------------------------------------------------------

    def run(self, blocks: Sequence[Block]) -> list[Outcome]:
        """Every block in order; after a failure the rest of its section is not run (it would fail
        for the same reason), the next section is."""
        outcomes: list[Outcome] = []
        failed_section: tuple[str, str] | None = None
        for block in blocks:
            section = (block.file, block.section)
            if section != self._section:
                self._new_section(section)
            if block.mode == "skip" or section == failed_section:
                continue
            outcome = self.run_block(block)
            outcomes.append(outcome)
            if not outcome.ok:
                failed_section = section
        return outcomes

    def run_block(self, block: Block) -> Outcome:
        code = substitute_ports(block.code, self.ports.documented())
        if block.mode == "background":
            return self._start_background(block, code)
        if block.is_shell:
            return self._run_shell(block, code)
        return self._run_python(block, code)

    def _new_section(self, section: tuple[str, str]) -> None:
        self._section = section
        self._counter += 1
        self._state = os.path.join(self.logs, f"state-{self._counter}.sh")
        self._stop_python()

    def _script(self, code: str, *, state: bool) -> str:
        lines = ["set -eo pipefail", 'curl() { command curl --fail-with-body "$@"; }']
        if state:
            lines += [f"__readme_save() {{ local __name; for __name in $(compgen -v); do case $__name in {SHELL_OWN}) "
                      f"continue;; esac; declare -p \"$__name\"; done > '{self._state}' 2>/dev/null; "
                      f"env -0 > '{self._state}.env'; }}",
                      "trap __readme_save EXIT",
                      f"if [ -f '{self._state}' ]; then source '{self._state}'; fi"]
        return "\n".join(lines) + "\n" + code

    def _log_path(self, block: Block) -> str:
        return os.path.join(self.logs, f"{self._prefix(block)}line-{block.line}.log")

    @staticmethod
    def _prefix(block: Block) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "-", block.file) + "-" if block.file else ""

    def _spawn_shell(self, block: Block, code: str, *, state: bool) -> tuple[subprocess.Popen[bytes], str]:
        """The block as a bash script in a session of its own, its output in its log; the process
        and the log's path."""
        script = os.path.join(self.logs, f"{self._prefix(block)}line-{block.line}.sh")
        with open(script, "w", encoding="utf-8") as f:
            f.write(self._script(code, state=state))
        log_path = self._log_path(block)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(["bash", script], cwd=self.work, env=self.base_env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return proc, log_path

    def _run_shell(self, block: Block, code: str) -> Outcome:
        proc, log_path = self._spawn_shell(block, code, state=True)
        limit = block.interrupt_after_s if block.mode == "interrupt" else BLOCK_TIMEOUT_S
        try:
            code_ = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            finally:
                _stop_group(proc)
            if block.mode == "interrupt":
                return Outcome(block, True)
            return Outcome(block, False, f"still running after {limit:g} s\n{_tail(log_path)}")
        if code_ != 0:
            return Outcome(block, False, f"exit status {code_}\n{_tail(log_path)}")
        return Outcome(block, True)

    def _shell_env(self) -> dict[str, str]:
        """The environment the section's shell has exported so far (as a new terminal's at first)."""
        try:
            with open(self._state + ".env", "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return dict(self.base_env)
        pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
        return {name: value for name, _, value in pairs}

    def _run_python(self, block: Block, code: str) -> Outcome:
        python = self._python or self._start_python()
        assert python.proc.stdin is not None
        offset = os.path.getsize(python.log_path)
        request = {"file": block.file or self.file, "line": block.line, "code": code, "env": self._shell_env()}
        python.proc.stdin.write(json.dumps(request) + "\n")
        python.proc.stdin.flush()
        limit = block.interrupt_after_s if block.mode == "interrupt" else BLOCK_TIMEOUT_S
        answer = self._python_answer(python, limit)
        if answer is None and block.mode == "interrupt":
            _signal_group(python.proc, signal.SIGINT)
            answer = self._python_answer(python, STOP_TIMEOUT_S)
        output = _tail(python.log_path, offset)
        if answer is None:
            self._stop_python()
            return Outcome(block, False, f"no answer within {limit:g} s\n{output}")
        if not answer["ok"]:
            return Outcome(block, False, f"{answer['error']}\n{output}")
        return Outcome(block, True)

    def _python_answer(self, python: _Python, timeout_s: float) -> dict[str, object] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([python.replies], [], [], POLL_S)
            if ready:
                chunk = os.read(python.replies, 65_536)
                python.buffered += chunk
                if python.buffered.endswith(b"\n") or not chunk:
                    line, python.buffered = python.buffered, b""
                    if not line:
                        break
                    answer: dict[str, object] = json.loads(line)
                    return answer
            elif python.proc.poll() is not None:
                break
        if python.proc.poll() is not None:
            return {"ok": False, "error": f"the interpreter exited with {python.proc.returncode}"}
        return None

    def _start_python(self) -> _Python:
        read_fd, write_fd = os.pipe()
        log_path = os.path.join(self.logs, f"python-{self._counter}.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([os.path.join(self.work, ".venv", "bin", "python"), PYTHON_WORKER, str(write_fd)],
                                    cwd=self.work, env=self._shell_env(), stdin=subprocess.PIPE, stdout=log,
                                    stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True, text=True)
        os.close(write_fd)
        self._python = _Python(proc, read_fd, log_path)
        return self._python

    def _stop_python(self) -> None:
        python, self._python = self._python, None
        if python is None:
            return
        with contextlib.suppress(OSError):
            assert python.proc.stdin is not None
            python.proc.stdin.close()
        try:
            python.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_group(python.proc)
        os.close(python.replies)

    def _start_background(self, block: Block, code: str) -> Outcome:
        proc, log_path = self._spawn_shell(block, code, state=False)
        self._background.append(_Background(block, proc, log_path))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if block.ready_text in _read(log_path):
                return Outcome(block, True)
            if proc.poll() is not None:
                return Outcome(block, False, f"exited with {proc.returncode} before {block.ready_text!r}\n"
                                             f"{_tail(log_path)}")
            time.sleep(POLL_S)
        return Outcome(block, False, f"no {block.ready_text!r} within {READY_TIMEOUT_S:g} s\n{_tail(log_path)}")

    # -- stopping ------------------------------------------------------------------------------

    def close(self) -> None:
        self._stop_python()
        for background in reversed(self._background):
            _signal_group(background.proc, signal.SIGINT)  # a person's Ctrl-C in that terminal
            with contextlib.suppress(subprocess.TimeoutExpired):
                background.proc.wait(timeout=STOP_TIMEOUT_S)
            _stop_group(background.proc)
        self._background.clear()
        for pid in _working_in(self.work):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.work, ignore_errors=True)

    def background_logs(self) -> Iterator[tuple[Block, str]]:
        for background in self._background:
            yield background.block, _tail(background.log_path)


def _signal_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group the block was started in: its pid


def _stop_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL, to what is left of the group; the leader is reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_group(proc, sig)
        deadline = time.monotonic() + STOP_TIMEOUT_S / 3
        while time.monotonic() < deadline and _group_alive(proc.pid):
            proc.poll()
            time.sleep(POLL_S)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_TIMEOUT_S)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _working_in(directory: str) -> list[int]:
    """PIDs of the processes whose working directory is ``directory`` or below it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{entry}/cwd")
            if cwd == directory or cwd.startswith(directory + os.sep):
                found.append(int(entry))
    return found


def _read(path: str, offset: int = 0) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def _tail(path: str, offset: int = 0) -> str:
    text = _read(path, offset)
    return text if len(text) <= OUTPUT_TAIL_CHARS else "...\n" + text[-OUTPUT_TAIL_CHARS:]


def _makefile_stamps(root: str) -> set[str]:
    """The install stamps the Makefile's targets depend on (``.installed-<extras>``): all of them,
    whatever this environment was installed by, so no block's ``make`` installs anything."""
    with open(os.path.join(root, "Makefile"), encoding="utf-8") as makefile:
        return set(re.findall(r"\.installed-[A-Za-z+]+", makefile.read()))
