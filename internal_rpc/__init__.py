"""Node-to-node protocol: length-prefixed msgpack frames over one TLS connection per pair of
nodes (``frames`` has the format), many calls in flight, deadlines, typed errors (decision 0206),
and typed, versioned messages with one table of methods (``messages``, decision 0350)."""
