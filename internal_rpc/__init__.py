"""Node-to-node protocol on gRPC (``grpc.aio``): msgpack messages through generic handlers (no
protoc step), mutual TLS with the cluster CA, and a cluster token in the call metadata."""
