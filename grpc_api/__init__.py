"""The public gRPC API (DESIGN §4b): ``broker.proto``'s ``logbroker.v1.Broker`` service, served by
every node next to HTTP with the same authentication, ACLs, quotas and any-node routing."""
