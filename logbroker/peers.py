"""RPC channels from this node to the others, by node id, for forwarded calls.

A node's address comes from the coordinator's cache at each call, so a node that restarts on a
new address is reached there; a channel to an old address is closed and replaced. Errors come
back typed: what the other node's handler raised travels as a ``RemoteError`` with the same code
(so a forwarded request fails exactly as a local one would), and a node that cannot be reached
is a retriable ``NoLeaderError``. Calls are typed: a request of ``internal_rpc.messages`` goes
out under the method the table names for its type, and its answer comes back decoded into the
table's answer type (one that does not decode is a retriable ``NotAvailableError``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TypeVar, cast

from coordinator.base import Coordinator
from internal_rpc.client import RpcClient, RpcStream
from internal_rpc.errors import RpcCallError, Status
from internal_rpc.messages import Answer, MessageError, Method, Request, decode, method_of
from internal_rpc.security import TlsFiles
from logbroker.errors import ForwardOutcomeUnknownError, NoLeaderError, NotAvailableError, RemoteError
from logbroker.rpc_service import SERVICE

DEADLINE_S: Final = 10.0
RETIRED_MAX: Final = 16
SILENT_S: Final = 2.0
# Failures after which a sent call may have run on the other node.
MAYBE_DELIVERED: Final = frozenset({Status.DEADLINE_EXCEEDED, Status.CANCELLED, Status.UNKNOWN, Status.INTERNAL})
A = TypeVar("A", bound=Answer)


def _answer(node_id: int, method: Method, body: dict[str, object], _request: Request[A]) -> A:
    """``body`` decoded as ``method``'s answer: the type the table gives, which is the answer type
    ``_request`` is declared with (a test checks the table against the declarations)."""
    try:
        return cast(A, decode(method.answer, body))
    except MessageError as exc:
        raise NotAvailableError(f"node {node_id} answered {method.name} with a malformed answer: {exc}",
                                node=node_id) from exc


class Peers:
    def __init__(self, coordinator: Coordinator, *, tls: TlsFiles | None, cluster_token: str | None,
                 node_id: int | None = None, on_silent: Callable[[int], None] | None = None) -> None:
        """``node_id``: this node's, named to the others when connecting; ``on_silent``: called
        with a node's id when a call to it went unanswered (it may have crashed:
        ``logbroker.crash_watch`` looks)."""
        self._coordinator = coordinator
        self._node_id = node_id
        self._on_silent = on_silent
        self._tls = tls
        self._token = cluster_token
        self._clients: dict[int, RpcClient] = {}
        self._retired: list[RpcClient] = []  # channels to old addresses, closed later
        # node -> (monotonic time until which it counts as unreachable, the start of the run that went silent)
        self._silent_until: dict[int, tuple[float, int]] = {}
        self._streams: dict[tuple[int, str], tuple[RpcClient, RpcStream]] = {}
        self._closed = False

    def _client(self, node_id: int) -> RpcClient:
        """The channel to ``node_id`` at its current address (no await: two callers never race
        to create two). A channel to an old address is retired, not closed under calls in flight."""
        info = self._coordinator.cached_node(node_id)
        if info is None or not info.rpc_address:
            raise NoLeaderError(f"node {node_id} is not alive", node=node_id)
        client = self._clients.get(node_id)
        if client is not None and client.address != info.rpc_address:
            self._retired.append(client)
            client = None
        if client is None:
            client = RpcClient(info.rpc_address, tls=self._tls, cluster_token=self._token,
                               node_id=self._node_id)
            self._clients[node_id] = client
        return client

    async def call(self, node_id: int, request: Request[A], *,
                   deadline_s: float = DEADLINE_S, idempotent: bool = True) -> A:
        """Call ``request``'s method on node ``node_id``: its typed answer; its typed error, or
        ``NoLeaderError`` when it cannot be reached. A call that is not ``idempotent`` (a write)
        and got no answer after it may have been delivered (deadline, cancelled) is
        ``ForwardOutcomeUnknownError`` instead: retrying it could store it twice."""
        if self._closed:
            raise NoLeaderError("the node is stopping")
        client = self._client(node_id)
        if len(self._retired) > RETIRED_MAX:
            await self._retired.pop(0).close()
        method = method_of(request)
        try:
            body = await client.call(SERVICE, method.name, request, deadline_s=deadline_s)
        except RpcCallError as exc:
            if exc.answered:
                self._silent_until.pop(node_id, None)
                raise RemoteError(exc.code, exc.detail, retriable=exc.retriable, **exc.extra) from exc
            self._went_silent(node_id)
            if not idempotent and exc.status in MAYBE_DELIVERED:
                raise ForwardOutcomeUnknownError(f"node {node_id} did not answer in time ({exc.status.name.lower()}): "
                                                 "the write may or may not be stored", node=node_id) from exc
            raise NoLeaderError(f"node {node_id} did not answer ({exc.status.name.lower()})", node=node_id) from exc
        self._silent_until.pop(node_id, None)
        return _answer(node_id, method, body, request)

    async def stream_call(self, node_id: int, request: Request[A], *, deadline_s: float = DEADLINE_S) -> A:
        """``request``'s method on node ``node_id`` over a long-lived stream kept per node and
        method (made again after any failure of the stream): for calls that repeat often and may be resent
        (a leader's shipments). Errors as ``call``'s."""
        if self._closed:
            raise NoLeaderError("the node is stopping")
        client = self._client(node_id)
        method = method_of(request)
        key = (node_id, method.name)
        held = self._streams.get(key)
        if held is None or held[0] is not client or held[1].closed:
            if held is not None:
                held[1].close()
            held = (client, client.stream(SERVICE, method.name))
            self._streams[key] = held
        try:
            body = await held[1].call(request, deadline_s=deadline_s)
        except RpcCallError as exc:
            if exc.answered:
                raise RemoteError(exc.code, exc.detail, retriable=exc.retriable, **exc.extra) from exc
            self._went_silent(node_id)
            raise NoLeaderError(f"node {node_id} did not answer ({exc.status.name.lower()})", node=node_id) from exc
        return _answer(node_id, method, body, request)

    def _went_silent(self, node_id: int) -> None:
        info = self._coordinator.cached_node(node_id)
        self._silent_until[node_id] = (time.monotonic() + SILENT_S, info.started_ms if info is not None else 0)
        if self._on_silent is not None:
            self._on_silent(node_id)

    def unreachable(self, node_id: int) -> bool:
        """True for ``SILENT_S`` after a call to ``node_id`` went unanswered (reads then go to a
        replica at once instead of waiting out another deadline), unless the node has registered
        again since: a restarted node is called at once, its last run's silence is not held against it."""
        silent = self._silent_until.get(node_id)
        if silent is None:
            return False
        until, started_ms = silent
        info = self._coordinator.cached_node(node_id)
        if time.monotonic() >= until or (info is not None and info.started_ms != started_ms):
            del self._silent_until[node_id]
            return False
        return True

    async def close(self) -> None:
        self._closed = True
        for _, stream in self._streams.values():
            stream.close()
        self._streams = {}
        clients, self._clients = [*self._clients.values(), *self._retired], {}
        self._retired = []
        for client in clients:
            await client.close()
