"""The control channel of ``make cluster``: ``logbroker dev-cluster`` asks the running launcher to
stop, kill or start one of its nodes, or for their state, through a Unix socket in the cluster's
work dir (``control.sock``, decision 0271).

The launcher owns every node it runs, also one started again on request, so its Ctrl-C still
stops them all; the command only asks. One request and one reply per connection, each one line of
JSON of bounded size; the launcher serves them one at a time from its main loop, each read and
write under a timeout. The socket is its owner's alone: made mode 0600, and a caller of another
uid (``SO_PEERCRED``) is refused. A socket file left by a launcher that died answers no one: the
command says no cluster runs, and the next launcher replaces it.

Requests: ``{"op": "status"}`` and ``{"op": "stop"|"kill"|"start", "node": N}``. Replies:
``{"ok": true, "message": str, "cluster": {...}}`` or ``{"ok": false, "code": str, "error": str}``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import socket
import struct
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Final

# What the launcher and the command both know of a running cluster (this module needs only the
# standard library, so the command works on a client-only install).
NODE_IDS: Final = (1, 2, 3)
DEFAULT_DIR: Final = os.path.join(".", ".data", "cluster")
ADMIN_USER: Final = "admin"
ADMIN_PASSWORD: Final = "dev-admin-password"
NODE_START_TIMEOUT_S: Final = 60.0
SOCKET_NAME: Final = "control.sock"
OPS: Final = ("status", "stop", "kill", "start")
NODE_OPS: Final = ("stop", "kill", "start")
REQUEST_BYTES_MAX: Final = 1_024
REPLY_BYTES_MAX: Final = 1_048_576
IO_TIMEOUT_S: Final = 5.0  # the launcher's wait for a request, and a caller's for a connection
BACKLOG: Final = 8
SUN_PATH_MAX: Final = 107  # bytes of a Unix socket address (108 with its NUL)
_UCRED: Final = struct.Struct("3i")  # pid, uid, gid


def work_dir_from_env(env: Mapping[str, str]) -> str:
    """The cluster's work dir: ``CLUSTER_DIR``, else ``./.data/cluster``, made absolute."""
    return os.path.abspath(env.get("CLUSTER_DIR") or DEFAULT_DIR)


class ControlError(Exception):
    """A request the launcher cannot do, with a stable ``code`` the reply carries."""

    code = "control_error"


class BadRequestError(ControlError):
    code = "bad_request"


class UnknownNodeError(ControlError):
    code = "unknown_node"


class NodeStateError(ControlError):
    """The node is already in the state asked for (running for ``start``, down for ``stop``/``kill``)."""

    code = "node_state"


class StartFailedError(ControlError):
    code = "start_failed"


class NotRunningError(ControlError):
    """No launcher answers in this work dir."""

    code = "not_running"


@dataclasses.dataclass(frozen=True)
class Request:
    op: str
    node_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op} if self.node_id is None else {"op": self.op, "node": self.node_id}


def request(op: str, node_id: int | None, node_ids: Collection[int]) -> Request:
    """A checked request: a known op, and a node id (one of ``node_ids``) exactly for the node ops."""
    if op not in OPS:
        raise BadRequestError(f"unknown operation {op!r}; one of {', '.join(OPS)}")
    if op not in NODE_OPS:
        if node_id is not None:
            raise BadRequestError(f"{op} takes no node id")
        return Request(op)
    if node_id is None:
        raise BadRequestError(f"{op} needs a node id")
    if isinstance(node_id, bool) or not isinstance(node_id, int) or node_id not in node_ids:
        raise UnknownNodeError(f"no node {node_id!r} in this cluster; its nodes are "
                               f"{', '.join(map(str, sorted(node_ids)))}")
    return Request(op, node_id)


def parse_request(line: bytes, node_ids: Collection[int]) -> Request:
    """The request in one line as a caller sent it (``BadRequestError`` when it is not one)."""
    try:
        body = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        raise BadRequestError("a request is one line of JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("op"), str) or set(body) - {"op", "node"}:
        raise BadRequestError('a request is {"op": ..., "node": ...}')
    return request(body["op"], body.get("node"), node_ids)


def failure(error: ControlError) -> dict[str, Any]:
    return {"ok": False, "code": error.code, "error": str(error)}


def encode(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def parse_reply(line: bytes) -> dict[str, Any]:
    """The launcher's reply; a refusal is raised as ``ControlError`` with the launcher's words."""
    try:
        reply = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        raise ControlError("the launcher's reply is not JSON") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise ControlError("the launcher's reply has no ok field")
    if not reply["ok"]:
        error = ControlError(str(reply.get("error", "refused")))
        error.code = str(reply.get("code", ControlError.code))
        raise error
    return reply


def socket_path(work_dir: str) -> str:
    return os.path.join(work_dir, SOCKET_NAME)


@contextlib.contextmanager
def _address(path: str) -> Iterator[str]:
    """``path`` as a socket address: itself, or past the bytes an address holds, its name in its
    directory, entered for the call (the process is single-threaded then: the launcher before it
    starts anything, the command line)."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    cwd = os.getcwd()
    os.chdir(os.path.dirname(path))
    try:
        yield os.path.basename(path)
    finally:
        os.chdir(cwd)


def _read_line(conn: socket.socket, limit: int) -> bytes:
    """One line of at most ``limit`` bytes (``ControlError`` past it, or at an early end)."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(min(65_536, limit + 1 - len(data)))
        if not chunk:
            raise ControlError("the connection ended before a whole line")
        data += chunk
        if len(data) > limit and b"\n" not in data[:limit + 1]:
            raise ControlError(f"a line of more than {limit} bytes")
    return data.split(b"\n", 1)[0]


def ask(work_dir: str, message: Request, timeout_s: float) -> dict[str, Any]:
    """Send ``message`` to the launcher running in ``work_dir`` and return its reply (waiting at most
    ``timeout_s`` for it: a start waits for the node's ready line)."""
    path = socket_path(work_dir)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(IO_TIMEOUT_S)
        try:
            with _address(path) as address:
                conn.connect(address)
        except (FileNotFoundError, ConnectionRefusedError):
            raise NotRunningError(f"no `make cluster` is running in {work_dir} (nothing answers at {path}); "
                                  "start one, or set CLUSTER_DIR to its work dir") from None
        conn.sendall(encode(message.to_json()))
        conn.settimeout(timeout_s)
        try:
            line = _read_line(conn, REPLY_BYTES_MAX)
        except TimeoutError:
            raise ControlError(f"the launcher did not answer within {timeout_s:g} s (it answers once its nodes "
                               "are up, one request at a time)") from None
        except ControlError:
            raise ControlError("the launcher stopped before it answered") from None
    return parse_reply(line)


class ControlServer:
    """The launcher's end: a listening socket, served one request at a time by ``serve_once``."""

    def __init__(self, work_dir: str, node_ids: Collection[int]) -> None:
        self.path = socket_path(work_dir)
        self.node_ids = frozenset(node_ids)
        self._sock: socket.socket | None = None

    def open(self) -> ControlServer:
        """Listen; refuse when another launcher answers here, replace a socket one left behind."""
        if os.path.exists(self.path):
            try:
                ask(os.path.dirname(self.path), Request("status"), IO_TIMEOUT_S)
            except NotRunningError:
                os.unlink(self.path)
            except ControlError:  # one listens, busy: a launcher all the same
                raise ControlError(f"a `make cluster` is already running in {os.path.dirname(self.path)}") from None
            else:
                raise ControlError(f"a `make cluster` is already running in {os.path.dirname(self.path)}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o177)
        try:
            with _address(self.path) as address:
                sock.bind(address)
            sock.listen(BACKLOG)
        except BaseException:
            sock.close()
            raise
        finally:
            os.umask(previous)
        self._sock = sock
        return self

    def serve_once(self, handle: Callable[[Request], dict[str, Any]], wait_s: float) -> bool:
        """Answer one request if one comes within ``wait_s``; False when none came. ``handle``
        returns the reply or raises ``ControlError``; a caller's mistakes never reach the launcher."""
        assert self._sock is not None
        if not select.select([self._sock], [], [], wait_s)[0]:
            return False
        conn, _ = self._sock.accept()
        with conn:
            conn.settimeout(IO_TIMEOUT_S)
            try:
                _, uid, _ = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
                if uid != os.getuid():
                    raise ControlError(f"uid {uid} may not control this cluster")
                reply = handle(parse_request(_read_line(conn, REQUEST_BYTES_MAX), self.node_ids))
            except ControlError as exc:
                reply = failure(exc)
            except OSError:
                return True  # the caller went away or sent nothing in time: nothing to answer
            with contextlib.suppress(OSError):
                conn.sendall(encode(reply))
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
