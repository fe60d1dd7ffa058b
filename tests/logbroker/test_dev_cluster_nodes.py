"""``make cluster``'s node slots, on real node processes: a node killed or stopped is down while
nothing else is touched, a second kill or start says the node's state, a start brings the node
back with the same command line, a node that dies on its own is said once, and ``stop_all``
reaches the process started last."""

from __future__ import annotations

import os
import signal

import pytest

from logbroker.dev_cluster_control import NodeStateError, Request, StartFailedError
from logbroker.dev_cluster_nodes import NodeSlots
from tests.support.cluster import wait_until
from tests.support.nodes import NodeProcess
from tests.support.processes import alive

START_TIMEOUT_S = 60.0



def test_kill_stop_and_start_one_node_and_stop_all(tmp_path):
    data = str(tmp_path / "node")
    made: list[NodeProcess] = []

    def make(node_id: int) -> NodeProcess:
        made.append(NodeProcess(data, node_id=node_id))
        return made[-1]

    slots = NodeSlots(make, {1: "http://127.0.0.1:1"}, START_TIMEOUT_S)
    try:
        assert slots.status()[0]["state"] == "down" and slots.status()[0]["exit_code"] is None
        assert slots.start(1).startswith("node 1 started (pid ")
        first = made[-1].pid
        assert slots.status()[0] | {"argv": None, "log": None} == {
            "node_id": 1, "pid": first, "state": "running", "http_url": "http://127.0.0.1:1",
            "grpc_address": made[-1].grpc_address, "exit_code": None, "argv": None, "log": None}
        with pytest.raises(NodeStateError, match=f"node 1 is already running \\(pid {first}\\)"):
            slots.act(Request("start", 1))
        assert slots.act(Request("kill", 1)) == f"node 1 (pid {first}) killed (SIGKILL), exit code -9"
        assert not alive(first) and slots.reap() == []  # asked for: nothing more to say
        assert slots.status()[0]["state"] == "down" and slots.status()[0]["exit_code"] == -9
        for op in ("kill", "stop"):
            with pytest.raises(NodeStateError, match="node 1 is already down"):
                slots.act(Request(op, 1))
        slots.act(Request("start", 1))
        second = made[-1].pid
        assert second != first and made[-1].args == made[0].args  # the same command line
        assert slots.act(Request("stop", 1)).startswith(f"node 1 (pid {second}) stopped (SIGTERM), exit code ")
        slots.act(Request("start", 1))
        third = made[-1].pid
        os.kill(third, signal.SIGKILL)  # on its own, as far as the slots know
        said = wait_until(slots.reap)
        assert said == [f"node 1 (pid {third}) exited with -9; see None; the other nodes keep serving "
                        "(`logbroker dev-cluster start 1` starts it again)"]
        assert slots.reap() == []
        slots.start(1)
        assert [p.pid for p in slots.processes()] == [made[-1].pid]
        slots.stop_all()
        assert not alive(made[-1].pid) and slots.status()[0]["state"] == "down"
    finally:
        for process in made:
            process.stop()
            process.kill()


def test_a_node_that_cannot_start_is_said_and_left_down(tmp_path):
    def make(node_id: int) -> NodeProcess:
        return NodeProcess(str(tmp_path / "node"), "--http-port", "not-a-port", node_id=node_id)

    slots = NodeSlots(make, {1: "http://127.0.0.1:1"}, START_TIMEOUT_S)
    with pytest.raises(StartFailedError, match="node 1 exited with"):
        slots.start(1)
    assert slots.status()[0]["state"] == "down" and slots.reap() == []
