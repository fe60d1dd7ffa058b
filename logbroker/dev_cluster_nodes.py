"""The nodes of a running ``make cluster``: one slot per node id holding its current process.

The launcher owns every process a slot ever holds: a node it started again on request replaces the
dead one in its slot, so ``stop_all`` (Ctrl-C, SIGTERM) reaches it by PID like the first ones. A
node that dies leaves the others running; ``reap`` says so once. A node starts again with the same
command line (ports, data dir, certificates; the secrets in its environment), so it rejoins the
cluster and takes back its preferred leaderships. Every wait is bounded (the start by its ready
line's timeout, a stop by ``NodeProcess``' SIGTERM-then-SIGKILL bound).
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable, Mapping
from typing import Any

from logbroker.dev_cluster_control import NodeStateError, Request, StartFailedError
from logbroker.launcher import NodeProcess


@dataclasses.dataclass
class _Slot:
    process: NodeProcess | None = None
    reported: bool = True  # its end has been said (or it has not started)


def _running(process: NodeProcess | None) -> bool:
    return process is not None and process.proc is not None and process.proc.poll() is None


class NodeSlots:
    def __init__(self, make: Callable[[int], NodeProcess], http_urls: Mapping[int, str],
                 start_timeout_s: float) -> None:
        """``make(node_id)``: node ``node_id``'s process, not started, the same on every call;
        ``http_urls``: each node's URL, by node id."""
        self._make = make
        self._urls = dict(http_urls)
        self._slots = {node_id: _Slot() for node_id in http_urls}
        self._start_timeout_s = start_timeout_s

    def processes(self) -> list[NodeProcess]:
        """The current process of each node that has one, in node order."""
        return [slot.process for slot in self._slots.values() if slot.process is not None]

    def start(self, node_id: int) -> str:
        slot = self._slots[node_id]
        if _running(slot.process):
            assert slot.process is not None
            raise NodeStateError(f"node {node_id} is already running (pid {slot.process.pid})")
        process = self._make(node_id)
        slot.process, slot.reported = process, True
        try:
            process.start(self._start_timeout_s)
        except RuntimeError as exc:
            raise StartFailedError(str(exc)) from None
        slot.reported = False
        return f"node {node_id} started (pid {process.pid}), ready at {process.url}"

    def stop(self, node_id: int, *, graceful: bool) -> str:
        """SIGTERM and wait (SIGKILL after the bound) when ``graceful``, else SIGKILL."""
        slot = self._slots[node_id]
        process = slot.process
        if process is None or not _running(process):
            raise NodeStateError(f"node {node_id} is already down")
        assert process.proc is not None
        slot.reported = True
        if graceful:
            process.stop()
        process.kill()
        code = process.proc.returncode
        how = "killed (SIGKILL)"
        if graceful:
            how = "stopped (SIGTERM)" if code != -signal.SIGKILL else "killed (SIGKILL) when SIGTERM did not stop it"
        return f"node {node_id} (pid {process.pid}) {how}, exit code {code}"

    def act(self, request: Request) -> str:
        """Do a node request (``ControlError`` when it cannot be done); say what was done."""
        assert request.node_id is not None and request.node_id in self._slots
        if request.op == "start":
            return self.start(request.node_id)
        return self.stop(request.node_id, graceful=request.op == "stop")

    def reap(self) -> list[str]:
        """What to say about nodes that exited on their own since the last call, once each."""
        said = []
        for node_id, slot in self._slots.items():
            process = slot.process
            if slot.reported or process is None or process.proc is None or process.proc.poll() is None:
                continue
            slot.reported = True
            said.append(f"node {node_id} (pid {process.pid}) exited with {process.proc.returncode}; see "
                        f"{process.log_path}; the other nodes keep serving (`logbroker dev-cluster start "
                        f"{node_id}` starts it again)")
        return said

    def status(self) -> list[dict[str, Any]]:
        """Each node: its pid (None when down), URLs, command line and last exit code."""
        nodes = []
        for node_id, slot in self._slots.items():
            process = slot.process or self._make(node_id)
            running = _running(slot.process)
            nodes.append({"node_id": node_id, "pid": process.pid if running else None,
                          "state": "running" if running else "down",
                          "http_url": self._urls[node_id],
                          "grpc_address": process.grpc_address if running else None,
                          "exit_code": None if running or process.proc is None else process.proc.returncode,
                          "argv": process.args, "log": process.log_path})
        return nodes

    def stop_all(self) -> None:
        """Every running node told at once (SIGTERM), then each waited for (bounded) and reaped."""
        processes = [slot.process for slot in self._slots.values() if _running(slot.process)]
        for process in processes:
            assert process is not None and process.proc is not None
            process.proc.send_signal(signal.SIGTERM)
        for process in processes:
            assert process is not None
            process.stop()
            process.kill()
