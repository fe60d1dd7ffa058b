"""Node-to-node protocol: length-prefixed msgpack frames over one TLS connection per pair of
nodes (``frames`` has the format), many calls in flight, deadlines, typed errors (decision 0206)."""
