"""Channels to other nodes' gRPC listeners, for group subscriptions passed on to the node that
coordinates groups: each user's of their own.

A channel here is one HTTP/2 connection (each has a subchannel pool of its own), and a listener
takes at most ``grpc_calls_per_connection_max`` calls on one connection (``grpc_api.call_budget``;
a client's calls past it queue). With one channel for everyone, one user's subscriptions could fill
it and everyone else's would wait. Here a user's subscriptions to one node share channels of their
own, each carrying at most ``calls_per_channel`` of them; the next opens another. A channel is
closed with the last subscription on it, so there are at most as many channels as subscriptions
passed on, and how many a user has is bounded by their ``streams_max`` (the subscriptions hold it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from logbroker.config import NodeConfig

OpenChannel = Callable[[str], Any]  # address -> a channel (grpc.aio.Channel, or a test's stand-in)


@dataclasses.dataclass(slots=True)
class _Held:
    channel: Any
    calls: int = 0


class GroupChannels:
    def __init__(self, open_channel: OpenChannel, calls_per_channel: int) -> None:
        assert calls_per_channel > 0
        self._open = open_channel
        self._per_channel = calls_per_channel
        self._by_key: dict[tuple[str, str], list[_Held]] = {}

    @contextlib.asynccontextmanager
    async def channel(self, user: str, address: str) -> AsyncIterator[Any]:
        """One of ``user``'s channels to ``address`` with room for a call, held for the block."""
        key = (user, address)
        held = self._by_key.setdefault(key, [])
        spare = next((h for h in held if h.calls < self._per_channel), None)
        if spare is None:
            spare = _Held(self._open(address))
            held.append(spare)
        spare.calls += 1
        try:
            yield spare.channel
        finally:
            spare.calls -= 1
            if spare.calls == 0:
                held.remove(spare)
                if not held and self._by_key.get(key) is held:  # (``close`` may have dropped them all)
                    del self._by_key[key]
                await asyncio.shield(spare.channel.close())

    def channels(self) -> int:
        return sum(len(held) for held in self._by_key.values())

    async def close(self) -> None:
        held, self._by_key = [h for hs in self._by_key.values() for h in hs], {}
        for each in held:
            await each.channel.close()


def node_channel_opener(config: NodeConfig, message_bytes_max: int) -> OpenChannel:
    """Opens this node's channels to another node's public gRPC listener: over TLS when the
    listeners have a certificate, checked against ``rpc_tls_ca_file`` (or the system's CAs), showing
    this node's own certificate when listeners require one (as ``http_api.tls`` does for HTTPS)."""
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", message_bytes_max),
               ("grpc.max_send_message_length", message_bytes_max)]
    credentials = None
    if config.tls_cert_file:
        roots = _read(config.rpc_tls_ca_file) if config.rpc_tls_ca_file else None
        mutual = bool(config.tls_client_ca_file)
        credentials = grpc.ssl_channel_credentials(roots, _read(config.tls_key_file) if mutual else None,
                                                   _read(config.tls_cert_file) if mutual else None)

    def open_channel(address: str) -> grpc.aio.Channel:
        if credentials is None:
            return grpc.aio.insecure_channel(address, options=options)
        return grpc.aio.secure_channel(address, credentials, options=options)

    return open_channel


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
