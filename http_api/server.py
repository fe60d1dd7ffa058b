"""Run a node behind the HTTP API until SIGTERM/SIGINT: the ``logbroker serve`` command.

Start-up order: open the node (recovering logs), bind the listener (port 0 picks a free one;
HTTPS when a certificate is configured; ``http_api.listener`` bounds the connections and the time
to send a request head), print the ready line. Shutdown: stop accepting, let in-flight requests
finish (bounded by ``shutdown_grace_ms``), release long-polls, flush and close every log.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from typing import TextIO

from aiohttp import web

from http_api.app import build_app
from http_api.listener import ConnectionCollector, GuardedSite
from http_api.protocol import ProblemAppRunner
from http_api.tls import server_context
from logbroker.config import NodeConfig
from logbroker.node import Node

log = logging.getLogger("logbroker.server")


async def serve(config: NodeConfig, *, ready_stream: TextIO | None = None) -> None:
    node = Node(config)
    await node.start()
    gc.freeze()  # what start-up replayed (groups, queues) lives on: no full collection walks it (0176)
    app = build_app(node)
    runner = ProblemAppRunner(app, access_log=None, shutdown_timeout=config.shutdown_grace_ms / 1000,
                              keepalive_timeout=config.keepalive_timeout_ms / 1000)
    await runner.setup()
    site = GuardedSite(runner, config, ssl_context=server_context(config.tls_cert_file, config.tls_key_file))
    node.metrics.registry.register(ConnectionCollector(site.guard.count))
    try:
        await site.start()
        host, port = _bound_address(runner)
        url = f"{config.http_scheme}://{host}:{port}"
        stream = ready_stream or sys.stdout
        print(f"logbroker ready http={url} node={config.node_id}", file=stream, flush=True)
        log.info("serving", extra={"fields": {"http": url, "data_dir": config.data_dir, "auth": config.auth,
                                              "connections_max": site.guard.count.limit}})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping")
    finally:
        node.ready = False
        for replica in node.replicas.all():
            replica.wake_all()
        await runner.cleanup()
        await node.stop()
        log.info("stopped")


def _bound_address(runner: web.AppRunner) -> tuple[str, int]:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return address[0], address[1]
    raise RuntimeError("the HTTP listener has no address")
