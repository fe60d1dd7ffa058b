"""``make cluster``'s control channel: requests are checked before anything is done (unknown op or
node, a node id where none belongs, not JSON), replies carry the launcher's refusal, and the real
socket serves one request per connection, refuses a second launcher in the same work dir,
replaces a socket a dead launcher left, survives a caller that misbehaves, and works in a work
dir whose path is longer than a Unix socket address."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.dev_cluster_control import (
    REQUEST_BYTES_MAX,
    SUN_PATH_MAX,
    BadRequestError,
    ControlError,
    ControlServer,
    NodeStateError,
    NotRunningError,
    Request,
    UnknownNodeError,
    ask,
    encode,
    failure,
    parse_reply,
    parse_request,
    request,
    socket_path,
)

NODES = (1, 2, 3)


def test_requests_are_checked():
    assert request("status", None, NODES) == Request("status")
    assert request("kill", 2, NODES) == Request("kill", 2)
    assert parse_request(b'{"op":"start","node":3}', NODES) == Request("start", 3)
    assert parse_request(encode(Request("stop", 1).to_json()).rstrip(b"\n"), NODES) == Request("stop", 1)
    for op, node, error in (("kill", 4, UnknownNodeError), ("kill", 0, UnknownNodeError),
                            ("kill", None, BadRequestError), ("status", 1, BadRequestError),
                            ("restart", 1, BadRequestError)):
        with pytest.raises(error):
            request(op, node, NODES)
    for line in (b"", b"kill 2", b"[]", b'{"op":1}', b'{"op":"kill","node":true}', b'{"op":"kill","node":"2"}',
                 b'{"op":"status","extra":1}', b"\xff"):
        with pytest.raises(ControlError):
            parse_request(line, NODES)


@given(st.binary(max_size=200) | st.builds(lambda v: json.dumps(v).encode(), st.dictionaries(
    st.sampled_from(["op", "node", "x"]), st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)))))
def test_any_line_is_a_request_or_a_control_error(line: bytes):
    try:
        parsed = parse_request(line, NODES)
    except ControlError:
        return
    assert parsed.op in ("status", "stop", "kill", "start")
    assert (parsed.node_id is None) == (parsed.op == "status")
    assert parsed.node_id is None or parsed.node_id in NODES


def test_a_refusal_comes_back_as_the_launchers_error():
    with pytest.raises(ControlError, match="node 2 is already down") as caught:
        parse_reply(encode(failure(NodeStateError("node 2 is already down"))))
    assert caught.value.code == "node_state"
    assert parse_reply(b'{"ok":true,"message":"done"}')["message"] == "done"
    for line in (b"nope", b"{}", b'{"ok":"yes"}'):
        with pytest.raises(ControlError):
            parse_reply(line)


@contextmanager
def serving(work_dir: str, handled: list[Request]) -> Iterator[ControlServer]:
    """A control server in ``work_dir`` answering from a thread until the block ends."""
    server = ControlServer(work_dir, NODES).open()
    done = threading.Event()

    def handle(req: Request) -> dict[str, Any]:
        handled.append(req)
        if req.op == "kill" and req.node_id == 3:
            raise NodeStateError("node 3 is already down")
        return {"ok": True, "message": f"{req.op} {req.node_id}"}

    def loop() -> None:
        while not done.is_set():
            server.serve_once(handle, 0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        done.set()
        thread.join(timeout=10)
        server.close()


def test_a_request_over_the_socket_and_the_refusals(tmp_path):
    handled: list[Request] = []
    with pytest.raises(NotRunningError, match="no `make cluster` is running"):
        ask(str(tmp_path), Request("status"), 5)
    with serving(str(tmp_path), handled):
        assert stat.S_IMODE(os.stat(socket_path(str(tmp_path))).st_mode) == 0o600
        assert ask(str(tmp_path), Request("kill", 2), 5)["message"] == "kill 2"
        with pytest.raises(ControlError, match="node 3 is already down"):
            ask(str(tmp_path), Request("kill", 3), 5)
        with pytest.raises(ControlError, match="already running"):
            ControlServer(str(tmp_path), NODES).open()
        for junk in (b"not json\n", b"x" * (REQUEST_BYTES_MAX + 10), b""):  # a caller's mistakes
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(10)
                conn.connect(socket_path(str(tmp_path)))
                conn.sendall(junk)
                conn.shutdown(socket.SHUT_WR)
                answer = conn.recv(4096)
                assert not junk or json.loads(answer)["ok"] is False
        assert ask(str(tmp_path), Request("status"), 5)["message"] == "status None"
    assert handled == [Request("kill", 2), Request("kill", 3), Request("status"), Request("status")]
    assert not os.path.exists(socket_path(str(tmp_path)))
    with pytest.raises(NotRunningError):
        ask(str(tmp_path), Request("status"), 5)


def test_a_socket_left_by_a_dead_launcher_is_replaced(tmp_path):
    left = socket.socket(socket.AF_UNIX)
    left.bind(socket_path(str(tmp_path)))
    left.close()  # the file stays, nothing listens
    with pytest.raises(NotRunningError):
        ask(str(tmp_path), Request("status"), 5)
    with serving(str(tmp_path), []):
        assert ask(str(tmp_path), Request("start", 1), 5)["ok"]


def test_a_work_dir_longer_than_a_socket_address(tmp_path):
    deep = tmp_path
    while len(os.fsencode(str(deep / "control.sock"))) <= SUN_PATH_MAX:
        deep = deep / ("d" * 40)
    os.makedirs(deep)
    cwd = os.getcwd()
    with serving(str(deep), []):
        assert ask(str(deep), Request("stop", 2), 5)["message"] == "stop 2"
    assert os.getcwd() == cwd


def test_a_launcher_too_busy_to_answer_still_counts_as_running(tmp_path):
    with socket.socket(socket.AF_UNIX) as busy:  # listens, never answers (as while it starts its nodes)
        busy.bind(socket_path(str(tmp_path)))
        busy.listen()
        with pytest.raises(ControlError, match="did not answer within 1 s"):
            ask(str(tmp_path), Request("status"), 1)
        with pytest.raises(ControlError, match="already running"):
            ControlServer(str(tmp_path), NODES).open()
        assert os.path.exists(socket_path(str(tmp_path)))
