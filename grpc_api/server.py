"""The public gRPC server of a node: ``logbroker.v1.Broker`` plus server reflection, on
``--grpc-port`` (0 picks a free port), with the HTTP listener's certificate when one is configured
and its client CA when clients must show a certificate.
It is bound before the node starts, so a cluster node advertises its real address.

Every method goes through ``CallGate`` (shares of ``grpc_calls_max``, the token, a deadline on the
request message), so each is registered with a request-stream handler; clients see the methods the
``.proto`` declares, since the wire does not tell a unary request from a stream of one. HTTP/2's
``SETTINGS_MAX_CONCURRENT_STREAMS`` also carries ``grpc_calls_per_connection_max``, so a gRPC
client queues its calls past it instead of having them refused."""

from __future__ import annotations

from typing import Final

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

from grpc_api.convert import message_bytes_max
from grpc_api.gate import CallGate
from grpc_api.service import BrokerService, pb
from logbroker.config import NodeConfig
from logbroker.node import Node

STOP_GRACE_S: Final = 5.0
SERVICE_NAME: Final = pb.DESCRIPTOR.services_by_name["Broker"].full_name


class GrpcServer:
    def __init__(self, config: NodeConfig) -> None:
        limit = message_bytes_max(config)
        self.config = config
        self._server = grpc.aio.server(maximum_concurrent_rpcs=config.grpc_calls_max,
                                       options=[("grpc.max_receive_message_length", limit),
                                                ("grpc.max_send_message_length", limit),
                                                ("grpc.max_concurrent_streams", config.grpc_calls_per_connection_max),
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
        self.gate: CallGate | None = None

    async def start(self, node: Node) -> None:
        self.service = service = BrokerService(node)
        self.gate = gate = CallGate(self.config, node.auth)
        self._add(SERVICE_NAME, {
            "Publish": grpc.stream_unary_rpc_method_handler(
                gate.unary(service.Publish), request_deserializer=pb.PublishRequest.FromString,
                response_serializer=pb.PublishResponse.SerializeToString),
            "Subscribe": grpc.stream_stream_rpc_method_handler(
                gate.streaming(service.Subscribe), request_deserializer=pb.SubscribeRequest.FromString,
                response_serializer=pb.Record.SerializeToString),
            "SubscribeBatches": grpc.stream_stream_rpc_method_handler(
                gate.streaming(service.SubscribeBatches), request_deserializer=pb.SubscribeRequest.FromString,
                response_serializer=pb.Records.SerializeToString)})
        reflecting = reflection.aio.ReflectionServicer((SERVICE_NAME, reflection.SERVICE_NAME))
        self._add(reflection.SERVICE_NAME, {
            "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                gate.public_stream(reflecting.ServerReflectionInfo),
                request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString)})
        await self._server.start()

    def _add(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        self._server.add_registered_method_handlers(service, handlers)

    async def stop(self) -> None:
        await self._server.stop(STOP_GRACE_S)
        if self.service is not None:
            await self.service.close()
