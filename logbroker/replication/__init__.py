"""Leader-to-follower replication (DESIGN §6): ``manager`` (roles, ISR, failback), ``leader`` (one
led partition: high watermark and ``acks=all`` waits), ``shipper`` (one call stream per
follower node), ``follower`` (applying shipments, truncation). The rules are the pure functions
of ``logbroker.partition_state``."""
