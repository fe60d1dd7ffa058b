"""One driver per system under test, all with the same operations (``base.Driver``)."""

from __future__ import annotations

from benchmarks.drivers.base import Driver
from benchmarks.servers import Endpoint


def driver_for(endpoint: Endpoint) -> Driver:
    """The driver of ``endpoint.system``; peer client libraries are imported only here, on use."""
    if endpoint.system == "logbroker":
        from benchmarks.drivers.logbroker_driver import LogBrokerDriver

        return LogBrokerDriver(endpoint)
    if endpoint.system == "logbroker-kafka":
        from benchmarks.drivers.kafka_driver import KafkaDriver

        return KafkaDriver(endpoint)
    if endpoint.system == "nats":
        from benchmarks.drivers.nats_driver import NatsDriver

        return NatsDriver(endpoint)
    if endpoint.system == "rabbitmq":
        from benchmarks.drivers.rabbitmq_driver import RabbitMQDriver

        return RabbitMQDriver(endpoint)
    raise ValueError(f"unknown system {endpoint.system!r}")
