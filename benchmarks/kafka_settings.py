"""How the benchmarks reach a node's Kafka listener with librdkafka (confluent-kafka), in one place:
the login (SASL PLAIN as the benchmarks' admin user) and the client settings measured best here,
used by ``kafka_bench`` (the listener against HTTP) and by the harness's ``logbroker-kafka`` driver
(the listener beside the peers). Plain data: importing it needs no Kafka client.

The producer hands librdkafka whole batches (``linger.ms`` ``THROUGHPUT_LINGER_MS``, room for
``QUEUE_MESSAGES_MAX`` queued records, so a fast producer is never refused for a full local queue);
a latency-minded producer sends each record at once (``LATENCY_LINGER_MS`` 0: a linger of 1 ms
put a millisecond on the p50 at 5,000 records/s, 1.5 ms against 0.7 ms). Every consumer sets
``fetch.queue.backoff.ms`` to ``FETCH_QUEUE_BACKOFF_MS``: by default librdkafka stops fetching for a
whole second each time its local queue holds ``queued.min.messages`` (100,000), which a consumer
that keeps up with the broker reaches every few hundred milliseconds; a figure would then measure
that pause, not the broker.
"""

from __future__ import annotations

from typing import Any, Final

ADMIN: Final = "bench-admin"
PASSWORD: Final = "bench-admin-password"
# A node's flags for its listener on a free port (announced in its ready line).
LISTENER_ARGS: Final = ("--kafka-port", "0")
# ... and for auth on with the admin user the clients log in as.
AUTH_ARGS: Final = ("--auth", "on", "--admin-user", ADMIN, "--admin-password", PASSWORD)
FETCH_BYTES: Final = 4 * 1024 * 1024
THROUGHPUT_LINGER_MS: Final = 5
LATENCY_LINGER_MS: Final = 0
QUEUE_MESSAGES_MAX: Final = 1_000_000
FETCH_QUEUE_BACKOFF_MS: Final = 10
LATENCY_FETCH_WAIT_MS: Final = 500   # Kafka's default fetch.max.wait.ms; a fetch returns at the first record


def client_config(address: str) -> dict[str, Any]:
    """Any client of the listener at ``address`` (host:port): SASL PLAIN as ``ADMIN``; a node
    that closes a connection at its stop is not logged as a failure."""
    return {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": ADMIN, "sasl.password": PASSWORD, "log.connection.close": False}


def producer_config(address: str, *, acks: str = "1", linger_ms: int = THROUGHPUT_LINGER_MS) -> dict[str, Any]:
    return {**client_config(address), "acks": acks, "linger.ms": linger_ms,
            "queue.buffering.max.messages": QUEUE_MESSAGES_MAX}


def consumer_config(address: str, group: str, **extra: Any) -> dict[str, Any]:
    """A consumer that is assigned partitions (never subscribes) and commits nothing; librdkafka
    wants a ``group`` all the same."""
    return {**client_config(address), "group.id": group, "enable.auto.commit": False,
            "fetch.max.bytes": FETCH_BYTES, "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS, **extra}
