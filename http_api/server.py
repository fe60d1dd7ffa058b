"""Run a node behind the HTTP API until SIGTERM/SIGINT: the ``logbroker serve`` command.

Start-up order: bind the HTTP listener (port 0 picks a free one; HTTPS when a certificate is
configured; ``http_api.listener`` bounds the connections and the time to send a request head) and
the public gRPC port (and the Kafka listener, ``--kafka-port``), open the node (recovering logs),
serve them, print the ready line.
Shutdown: stop accepting, let in-flight requests finish (bounded by ``shutdown_grace_ms``),
release long-polls, stop gRPC, flush and close every log.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
from typing import Final, TextIO

from grpc_api.server import GrpcServer
from http_api.app import build_app
from http_api.listener import ConnectionCollector, GuardedSite
from http_api.peers import watch_peers
from http_api.protocol import ProblemAppRunner
from http_api.tls import server_context
from kafka_api.server import KafkaServer
from logbroker.auth.hashing import HashLaneCollector
from logbroker.config import NodeConfig
from logbroker.data_dir_lock import DataDirLock
from logbroker.loop_watch import LoopWatch
from logbroker.node import Node

log = logging.getLogger("logbroker.server")
LISTEN_BACKLOG: Final = 1024


async def serve(config: NodeConfig, *, ready_stream: TextIO | None = None) -> None:
    """Run one node until SIGTERM or SIGINT, holding its data directory's lock throughout."""
    with DataDirLock(config.data_dir):
        await _serve_node(config, ready_stream)


async def _serve_node(config: NodeConfig, ready_stream: TextIO | None) -> None:
    node = Node(config)
    watch = LoopWatch(node.metrics.registry)
    watch.start()  # from the start: replaying groups and queues at start-up may hold the loop too
    try:
        await _serve_watched(node, config, ready_stream)
    finally:
        watch.stop()


async def _serve_watched(node: Node, config: NodeConfig, ready_stream: TextIO | None) -> None:
    # Bound before the node starts, so that a cluster node advertises its real port; connections
    # wait in the backlog until the site starts accepting.
    family = socket.AF_INET6 if ":" in config.http_host else socket.AF_INET
    sock = socket.create_server((config.http_host, config.http_port), family=family, backlog=LISTEN_BACKLOG)
    host, port = sock.getsockname()[:2]
    url = f"{config.http_scheme}://{host}:{port}"
    advertised = f"{config.http_scheme}://{config.advertised_host or host}:{port}"
    grpc_server = GrpcServer(config)
    grpc_address = f"{host}:{grpc_server.port}"
    kafka_server = KafkaServer(config, ssl_context=server_context(config)) if config.kafka_port >= 0 else None
    kafka_advertised = "" if kafka_server is None else \
        kafka_server.address(config.kafka_advertised_host or config.advertised_host or host,
                             config.kafka_advertised_port)
    try:
        await node.start(http_url=advertised, grpc_address=f"{config.advertised_host or host}:{grpc_server.port}",
                         kafka_address=kafka_advertised)
    except BaseException:
        sock.close()
        await grpc_server.stop()
        if kafka_server is not None:
            await kafka_server.stop()
        await node.stop()
        raise
    gc.freeze()  # what start-up replayed (groups, queues) lives on: no full collection walks it (0176)
    app = build_app(node)
    runner = ProblemAppRunner(app, access_log=None, shutdown_timeout=config.shutdown_grace_ms / 1000,
                              keepalive_timeout=config.keepalive_timeout_ms / 1000)
    await runner.setup()
    site = GuardedSite(runner, config, ssl_context=server_context(config),
                       sock=sock)
    node.metrics.registry.register(ConnectionCollector(site.guard.count))
    node.metrics.registry.register(HashLaneCollector(node.auth.hashing))
    peers: asyncio.Task[None] | None = None
    try:
        await site.start()
        peers = asyncio.get_running_loop().create_task(watch_peers(node, site.guard)) if node.clustered else None
        await grpc_server.start(node)
        kafka = ""
        if kafka_server is not None:
            await kafka_server.start(node, site.guard)
            kafka = f" kafka={kafka_server.address(host)}"
        stream = ready_stream or sys.stdout
        print(f"logbroker ready http={url} grpc={grpc_address}{kafka} node={config.node_id}", file=stream, flush=True)
        log.info("serving", extra={"fields": {"http": url, "grpc": grpc_address, "data_dir": config.data_dir,
                                              "auth": config.auth, "connections_max": site.guard.count.limit}})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping")
    finally:
        node.ready = False
        if peers is not None:
            peers.cancel()
        for replica in node.replicas.all():
            replica.wake_all()
        await grpc_server.stop()
        if kafka_server is not None:
            await kafka_server.stop()
        await runner.cleanup()
        await node.stop()
        log.info("stopped")
