"""Node-to-node protocol on gRPC (grpc.aio) with msgpack messages: forwarding and replication."""
