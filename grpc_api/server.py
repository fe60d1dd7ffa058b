"""The public gRPC server of a node: ``logbroker.v1.Broker`` plus server reflection, on
``--grpc-port`` (0 picks a free port), with the HTTP listener's certificate when one is configured
and its client CA when clients must show a certificate.
It is bound before the node starts, so a cluster node advertises its real address."""

from __future__ import annotations

from typing import Final

import grpc
from grpc_reflection.v1alpha import reflection

from grpc_api.service import BrokerService, pb, pb_grpc
from logbroker.config import NodeConfig
from logbroker.node import Node

STOP_GRACE_S: Final = 5.0
CALLS_MAX: Final = 4_096  # calls in progress on the node; more are refused (RESOURCE_EXHAUSTED) by grpcio
SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["Broker"].full_name


class GrpcServer:
    def __init__(self, config: NodeConfig) -> None:
        limit = config.request_body_bytes_max + 64 * 1024
        self._server = grpc.aio.server(maximum_concurrent_rpcs=CALLS_MAX,
                                       options=[("grpc.max_receive_message_length", limit),
                                                ("grpc.max_send_message_length", limit),
                                                ("grpc.keepalive_time_ms", 30_000)])
        address = f"{config.http_host}:{config.grpc_port}"
        if config.tls_cert_file:
            with open(config.tls_cert_file, "rb") as f:
                cert = f.read()
            with open(config.tls_key_file, "rb") as f:
                key = f.read()
            client_ca = None
            if config.tls_client_ca_file:  # mutual TLS, as on the HTTP listener (http_api.tls)
                with open(config.tls_client_ca_file, "rb") as f:
                    client_ca = f.read()
            credentials = grpc.ssl_server_credentials([(key, cert)], root_certificates=client_ca,
                                                      require_client_auth=client_ca is not None)
            self.port = self._server.add_secure_port(address, credentials)
        else:
            self.port = self._server.add_insecure_port(address)
        self.service: BrokerService | None = None

    async def start(self, node: Node, self_url: str) -> None:
        self.service = BrokerService(node, self_url)
        pb_grpc.add_BrokerServicer_to_server(self.service, self._server)
        reflection.enable_server_reflection((SERVICE_NAME, reflection.SERVICE_NAME), self._server)
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop(STOP_GRACE_S)
        if self.service is not None:
            await self.service.close()
